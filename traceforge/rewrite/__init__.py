"""Rewriting a trace's own events, byte-exact elsewhere: ``repair`` (what Perfetto would
lose), ``trim`` (a window or a range of steps), ``rebase`` (times relative to the start)."""
