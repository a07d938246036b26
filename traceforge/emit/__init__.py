"""What annotate writes, as exact JSON text: counter tracks, slices on lanes and flow arrows
(``tracks``), slices laid out so Perfetto sees no partial overlap (``lanes``), and where a flow
end must lie for Perfetto to bind it (``flow_anchors``)."""
