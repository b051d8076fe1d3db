"""What every long-running process exposes: the Prometheus `/metrics` endpoint with its
health and readiness probes (`http_metrics`) and the log formats (`log_format`).
"""
