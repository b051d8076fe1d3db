"""Read-only views of a running pipeline: one reading of every source (`pipeline_state`),
served as Prometheus metrics (`exporter`) or drawn live (`top_view`).
"""
