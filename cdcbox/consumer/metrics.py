"""Prometheus metrics of one consumer, in a registry of its own (no process globals), and
the HTTP endpoint serving /metrics and /healthz that the consumer and the relay share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class ConsumerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.records = Counter(
            "cdcbox_consumer_records",
            "Records by outcome",
            ["consumer", "outcome"],
            registry=self.registry,
        )
        self.retries = Counter(
            "cdcbox_consumer_retries", "Handler retries", ["consumer"], registry=self.registry
        )
        self.failures = Counter(
            "cdcbox_consumer_failures",
            "Handler failures (attempts)",
            ["consumer"],
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "cdcbox_consumer_handler_seconds",
            "Time in the handler's transaction",
            ["consumer"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.lag_seconds = Histogram(
            "cdcbox_consumer_commit_to_handle_seconds",
            "From occurred_at to handled",
            ["consumer"],
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.breaker_open = Gauge(
            "cdcbox_consumer_circuit_open",
            "1 while the circuit breaker holds records back",
            registry=self.registry,
        )


def serve(
    registry: CollectorRegistry, host: str, port: int, healthy: threading.Event
) -> ThreadingHTTPServer:
    """Serve /metrics and /healthz (200 while `healthy` is set) on a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                body, status, kind = generate_latest(registry), 200, CONTENT_TYPE_LATEST
            elif self.path == "/healthz":
                ok = healthy.is_set()
                body, status, kind = (
                    (b"ok\n" if ok else b"stopping\n"),
                    (200 if ok else 503),
                    "text/plain",
                )
            else:
                body, status, kind = b"not found\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="cdcbox-metrics", daemon=True).start()
    return server
