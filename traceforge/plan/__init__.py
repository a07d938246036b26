"""What a read of a trace keeps for the analyses that will read it: the scan plan of declared
features (``scan_plan.ScanPlan``: the annotate analyses, a path-level function), the filtered scan,
and the scans of the commands that read more than their features declare (``reads``). Below both
``api/`` and ``annotator/``."""
