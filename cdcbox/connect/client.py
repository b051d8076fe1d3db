"""A small Kafka Connect REST client; the only module that talks HTTP to Connect.

requests' errors become `ServiceUnavailable`, Connect's 4xx/5xx become `ConnectError`
carrying the status and Connect's own message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from cdcbox.errors import ConfigError, ConnectError, ServiceUnavailable, UsageError

_CONNECTOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,248}")


def check_connector_name(name: str) -> str:
    """`name`, if it is one cdcbox manages: letters, digits, '.', '_', '-' (it appears in
    REST paths, slot and topic names); a `UsageError` naming it otherwise."""
    if not isinstance(name, str) or not _CONNECTOR_NAME.fullmatch(name):
        raise UsageError(
            f"connector name {name!r} may hold only letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def connector_path(name: str) -> str:
    return quote(check_connector_name(name), safe="")


def tasks_by_id(status: dict[str, Any]) -> list[dict[str, Any]]:
    """A connector status's tasks in task-id order (Connect lists them in any order)."""
    return sorted(status.get("tasks", []), key=lambda t: int(t.get("id", 0)))


def describe_status(status: dict[str, Any] | None) -> str:
    """A connector's status in one line: "connector RUNNING, tasks 0:UNASSIGNED"."""
    if not status:
        return "not created yet"
    tasks = tasks_by_id(status)
    listed = ", ".join(f"{t.get('id')}:{t.get('state')}" for t in tasks) or "none yet"
    return f"connector {status['connector']['state']}, tasks {listed}"


class ConnectClient:
    """Connect's REST API. A malformed URL is refused here, before any request, as a
    `ConfigError`: it is the caller's mistake, not an unreachable service."""

    def __init__(
        self, url: str, auth: tuple[str, str] | None = None, timeout_s: float = 30
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"Kafka Connect URL {url!r} is not an http:// or https:// URL "
                "(e.g. http://127.0.0.1:8083)"
            )
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.auth = auth

    def _request(
        self, method: str, path: str, json: Any = None, allow: tuple[int, ...] = ()
    ) -> requests.Response:
        try:
            response = self._session.request(
                method, self.url + path, json=json, timeout=self.timeout_s
            )
        except requests.RequestException as e:
            raise ServiceUnavailable(
                f"Kafka Connect at {self.url} is unreachable ({type(e).__name__}); is the "
                "worker running? (`cdc-ctl stack status`)"
            ) from e
        if response.status_code >= 400 and response.status_code not in allow:
            try:
                message = str(response.json().get("message", response.text))
            except ValueError:  # an HTML error page from the worker's web server
                title = re.search(r"<title>(.*?)</title>", response.text, re.S)
                message = title.group(1) if title else response.text
            message = " ".join(message.split())
            raise ConnectError(
                f"Kafka Connect {method} {path}: HTTP {response.status_code}: {message}",
                status=response.status_code,
            )
        return response

    # --- plugins -------------------------------------------------------------------
    def plugins(self) -> list[dict[str, Any]]:
        return list(self._request("GET", "/connector-plugins?connectorsOnly=false").json())

    def validate(self, connector_class: str, config: dict[str, str]) -> dict[str, Any]:
        plugin = quote(connector_class.rsplit(".", 1)[-1], safe="")
        result = self._request("PUT", f"/connector-plugins/{plugin}/config/validate", config)
        return dict(result.json())

    # --- connectors ----------------------------------------------------------------
    def connectors(self) -> list[str]:
        return list(self._request("GET", "/connectors").json())

    def config(self, name: str) -> dict[str, str] | None:
        response = self._request("GET", f"/connectors/{connector_path(name)}/config", allow=(404,))
        return None if response.status_code == 404 else dict(response.json())

    def put_config(self, name: str, config: dict[str, str]) -> dict[str, Any]:
        return dict(
            self._request("PUT", f"/connectors/{connector_path(name)}/config", config).json()
        )

    def status(self, name: str) -> dict[str, Any] | None:
        response = self._request("GET", f"/connectors/{connector_path(name)}/status", allow=(404,))
        return None if response.status_code == 404 else dict(response.json())

    def delete(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{connector_path(name)}")

    def pause(self, name: str) -> None:
        self._request("PUT", f"/connectors/{connector_path(name)}/pause")

    def resume(self, name: str) -> None:
        self._request("PUT", f"/connectors/{connector_path(name)}/resume")

    def stop(self, name: str) -> None:
        self._request("PUT", f"/connectors/{connector_path(name)}/stop")

    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> None:
        query = f"includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
        self._request("POST", f"/connectors/{connector_path(name)}/restart?{query}")

    def restart_task(self, name: str, task: int) -> None:
        self._request("POST", f"/connectors/{connector_path(name)}/tasks/{task}/restart")

    def offsets(self, name: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/connectors/{connector_path(name)}/offsets").json())

    def alter_offsets(self, name: str, offsets: dict[str, Any]) -> None:
        self._request("PATCH", f"/connectors/{connector_path(name)}/offsets", offsets)

    def reset_offsets(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{connector_path(name)}/offsets")

    def wait_until(
        self,
        name: str,
        reached: str,
        timeout_s: float,
        poll_s: float = 0.3,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Poll the status until the connector is `reached` (RUNNING also needs every task
        RUNNING, and a FAILED connector or task then raises at once with its trace; a
        failed connector being stopped or paused is only waited for). `progress` hears
        each state seen on the way, once per change."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] | None = None
        seen = ""
        while True:
            last = self.status(name)
            if progress is not None and (described := describe_status(last)) != seen:
                seen = described
                progress(seen)
            if last:
                tasks = last.get("tasks", [])
                failed = [t for t in tasks if t["state"] == "FAILED"]
                if reached == "RUNNING" and (last["connector"]["state"] == "FAILED" or failed):
                    trace = (failed[0] if failed else last["connector"]).get("trace", "")
                    raise ConnectError(f"connector {name!r} FAILED:\n{trace}")
                if last["connector"]["state"] == reached and (
                    reached != "RUNNING" or (tasks and all(t["state"] == "RUNNING" for t in tasks))
                ):
                    return last
            if time.monotonic() >= deadline:
                raise ConnectError(
                    f"connector {name!r} not {reached} after {timeout_s:.0f}s; last status: {last}"
                )
            time.sleep(poll_s)
