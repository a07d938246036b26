"""Rows to columns: the scan of a trace into compact integer columns (``scan``), tables in
memory or spilled to disk (``table``), reading a spilled table back in windows (``windows``),
an nsys GPU-trace CSV as columns (``nsys``), and what is in a trace (``info``)."""
