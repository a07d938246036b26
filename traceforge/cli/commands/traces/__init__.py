"""Commands that write, check or serve a trace: annotate, repair, trim, merge, check, open, export."""
