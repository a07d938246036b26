"""GPU time: busy and idle per device and stream, idle gaps, time counted once, the
communication/computation overlap, the temporal and kernel-type breakdowns, kernel categories and
rules, short kernel names and GPU user annotations."""
