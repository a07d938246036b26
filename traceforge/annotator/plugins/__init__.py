"""The annotate analyses, one module each, each declaring ``ANALYSIS`` (an
``annotator.plugin.Analysis``). A module added here is found by ``annotator.registry``: its
flag, options, place in ``--all``, API keyword and summary columns follow from it."""
