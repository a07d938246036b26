"""Reading: codecs in, the streaming event reader, reading limits, rank files, scanner rows and
the user's side files (GPU limits, classification rules, ncu CSVs)."""
