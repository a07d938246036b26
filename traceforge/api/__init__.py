"""The Python API: ``load`` reads a trace once for every analysis (``trace``); the
path-level functions read a file for one analysis each (``files``)."""
