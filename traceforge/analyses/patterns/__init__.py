"""Patterns: frequent GPU op sequences under an operator, mined repeated runs, and the table
both give."""
