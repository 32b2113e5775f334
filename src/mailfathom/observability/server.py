"""``/metrics`` and ``/healthz`` on a port of the worker's own (``--metrics-port``).

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A small threaded HTTP server on a daemon thread: ``GET /metrics`` is the Prometheus
text format of one registry, ``GET /healthz`` runs a health check and answers 200
(healthy) or 503 with the report as JSON. It binds to loopback unless told
otherwise: the numbers name your queues and kinds. Bound to loopback, it answers only
requests whose ``Host`` is a loopback name, the rule of a console without a token
(:func:`~mailfathom.loopback.loopback_host`): a page that rebinds its own name to
127.0.0.1 gets a 421, not the numbers.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from mailfathom.errors import ConfigurationError
from mailfathom.loopback import is_loopback, loopback_host
from mailfathom.observability import metrics
from mailfathom.observability.gauges import DatabaseGauges
from mailfathom.observability.health import Report, check_store
from mailfathom.observability.logs import log_fields
from mailfathom.observability.smtp_gauge import SmtpConfigurationGauge

if TYPE_CHECKING:
    from mailfathom.app import MailFathom
    from mailfathom.jobs.worker.worker import Worker

__all__ = ["MetricsServer", "serve_worker_metrics"]

logger = logging.getLogger(__name__)


class MetricsServer:
    """Serves ``registry`` at ``/metrics`` and ``health()`` at ``/healthz`` on
    ``host:port`` (port 0 picks a free one: read :attr:`port`)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Callable[[], Report],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        handler = _handler(registry, health, loopback_only=is_loopback(host))
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve metrics on {host}:{port} ({exc}): choose another --metrics-port "
                "or --metrics-host"
            ) from exc
        self._server.daemon_threads = True
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="mailfathom-metrics", daemon=True
        )

    def start(self) -> MetricsServer:
        """Start serving on a daemon thread; returns self."""
        self._thread.start()
        logger.info(
            "serving /metrics and /healthz on http://%s:%d",
            self.host,
            self.port,
            extra=log_fields("metrics_serve", host=self.host, port=self.port),
        )
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _handler(
    registry: CollectorRegistry, health: Callable[[], Report], *, loopback_only: bool
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            host = self.headers.get("Host", "")
            if loopback_only and not loopback_host(host):
                refusal = (
                    f"refused: this port answers only to loopback names, not {host!r}; "
                    "scrape it as 127.0.0.1 or localhost\n"
                )
                self._send(421, "text/plain; charset=utf-8", refusal.encode())
            elif path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif path == "/healthz":
                report = health()
                body = json.dumps(report.as_dict()).encode()
                self._send(200 if report.ok else 503, "application/json", body)
            else:
                self._send(404, "text/plain; charset=utf-8", b"only /metrics and /healthz\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            if logger.isEnabledFor(logging.DEBUG):
                line = format % args
                logger.debug(
                    "metrics request: %s",
                    line,
                    extra=log_fields("metrics_request", client=self.address_string(), line=line),
                )

    return Handler


def serve_worker_metrics(app: MailFathom, worker: Worker, *, host: str, port: int) -> MetricsServer:
    """Install this process's metrics, add the database gauges, and serve them with
    ``/healthz`` (database, migrations, ``worker``'s heartbeat: a liveness probe, which
    an SMTP configuration error must not fail, or the worker would be restarted in a
    loop; ``mailfathom_smtp_configuration_error`` says it) on ``host:port``."""
    installed = metrics.install(kinds=app.registry.names())
    installed.registry.register(DatabaseGauges(app.store, app.clock))
    installed.registry.register(SmtpConfigurationGauge(app.deliverer.gate))
    return MetricsServer(
        installed.registry,
        lambda: check_store(app.store, app.clock, worker_id=worker.id),
        host=host,
        port=port,
    ).start()
