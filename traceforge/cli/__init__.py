"""The command line: ``traceforge COMMAND ...`` (``main``), one module per command in
``commands/``, table rendering, the many-file fan-out (``ranks``) and the ``open`` server.
Errors become one line and exit code 1 here, at the edge."""
