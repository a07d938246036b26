"""Analyses: pure functions from scan columns to tables and injections (never JSON)."""
