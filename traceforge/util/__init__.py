"""Small helpers every layer uses: exact time texts (``exacttime``), galloping searches
(``search``), distinct values (``distinct``), typed durations (``durations``), the progress
bar (``progress``) and pandas imported on first use (``lazy_pandas``)."""
