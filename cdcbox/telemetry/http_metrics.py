"""The HTTP endpoint of a long-running service (consumer or relay): `/metrics` for
Prometheus, `/healthz` (liveness: the loop runs) and `/readyz` (readiness, as the service
defines it), on a daemon thread, so neither service imports the other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from cdcbox.errors import ConfigError

Readiness = Callable[[], str | None]  # None when ready, else why not


def serve(
    registry: CollectorRegistry,
    host: str,
    port: int,
    healthy: threading.Event,
    readiness: Readiness | None = None,
) -> ThreadingHTTPServer:
    """Serve /metrics, /healthz (200 while `healthy` is set) and /readyz (200 while
    healthy and `readiness` finds nothing missing, else 503 with the reason). An address
    that cannot be bound (taken, or not this host's) is a `ConfigError` naming it."""

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
            elif self.path == "/readyz":
                missing = "stopping" if not healthy.is_set() else None
                if missing is None and readiness is not None:
                    missing = readiness()
                body = f"{missing or 'ready'}\n".encode()
                status, kind = (503 if missing else 200), "text/plain"
            else:
                body, status, kind = b"not found\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {e.strerror or e} (choose another "
            "--metrics-port, or --metrics-host)"
        ) from None
    threading.Thread(target=server.serve_forever, name="cdcbox-metrics", daemon=True).start()
    return server
