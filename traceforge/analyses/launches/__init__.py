"""Launches: the join of GPU ops to the runtime calls that put them on a stream, the streams'
queue length, launch delay and launches issued while the previous kernel still ran."""
