"""The Dash app: the frame (factory, ids, the data tick, table reads, pure figures) and one module per panel."""
