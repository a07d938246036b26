"""Across traces: a rank's summary statistics, two traces compared, stragglers among ranks and
tails compared."""
