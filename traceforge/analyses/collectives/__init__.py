"""Collectives across ranks: the per-rank table (``table``), matching (``matching``), the clock
fit (``clock``) and the waits (``waits``). Pure: tables in, tables out (docs/collectives.md)."""
