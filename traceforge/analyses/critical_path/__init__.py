"""The critical path: each annotation instance's dependency graph and its longest path."""
