"""Commands that print tables (and the report page): info, stats, launch-stats, patterns, classify,
counters, critical-path, diff, roofline, collectives, report."""
