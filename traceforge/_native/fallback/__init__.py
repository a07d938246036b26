"""Pure Python/numpy stand-ins for traceforge's C extensions, one module per kernel.

``traceforge._native`` picks each kernel's C module when it imports and the module here
otherwise (or when ``TRACEFORGE_NO_NATIVE=1`` forces them). Each module here exports the
names its C counterpart does and returns identical results: the same bytes, dtypes and
values, and the same exception types for bad input.
"""
