"""Writing: the copying writer, byte-exact patches and edits of events, JSON text from columns,
output names, atomic compressed output, table files and what a stopped run must remove."""
