"""The trace's structure that every analysis builds on: activity kinds, filters, profiler steps,
operator stacks, step series and the per-kind export tables."""
