"""CLI subcommands: each module has ``register(subparsers)`` that sets ``func`` on its parser.

``func(args) -> int`` returns the exit code; errors are raised as TraceforgeError.
"""
