"""The pipeline's own counters and histograms for Prometheus, updated by the sink once per batch."""
