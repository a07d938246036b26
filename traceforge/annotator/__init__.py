"""The annotate pipeline: the analyses (``plugins/``, each one module declaring an
``Analysis``, see ``plugin``), found by ``registry``; what the scan keeps for them (``plan``);
running them within a memory budget (``schedule``); and the copy that writes what they add
(``run``)."""
