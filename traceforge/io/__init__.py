"""Streaming trace I/O: codecs, the event reader and the copying writer.

Nothing here knows about GPUs; it deals in bytes, events and top-level keys.
"""
