"""Codes of 64-bit values in order of first appearance: the fallback of ``_factorize.c``.

A stable sort groups equal values with their first occurrence first; the groups, ranked by
where they are first met, are the codes.
"""

from __future__ import annotations

import numpy as np

from ._buffers import contiguous, items, writable_buffer


def factorize(values: object, codes: object, first: object) -> int:
    """Number the distinct values of ``values`` (8-byte items) 0, 1, ... as they are first met:
    ``codes[i]`` is value i's number and ``first[k]`` where number k is first met (both int64
    buffers as long as ``values``; ``first`` past the count is left as it is). Returns the count."""
    values_v = contiguous(values)
    codes_v = writable_buffer(codes)
    first_v = writable_buffer(first)
    n = len(values_v) // 8
    if len(values_v) % 8 or len(codes_v) != n * 8 or len(first_v) != n * 8:
        raise ValueError("values, codes and first must be 8-byte items, as many")
    bits = items(values_v, np.uint64)
    _, first_at, inverse = np.unique(bits, return_index=True, return_inverse=True)  # first_at: first occurrences
    by_appearance = np.argsort(first_at, kind="stable")
    rank = np.empty(len(first_at), np.int64)
    rank[by_appearance] = np.arange(len(first_at))
    items(codes_v, np.int64)[:] = rank[inverse.reshape(-1)]
    items(first_v, np.int64)[:len(first_at)] = first_at[by_appearance]
    return len(first_at)
