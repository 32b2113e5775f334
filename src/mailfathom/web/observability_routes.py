"""The console's ``/metrics`` (Prometheus) and ``/healthz`` (probes).

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``/metrics`` serves the database gauges (cached: one read per 10 s however often it
is scraped), plus this process's counters when metrics are installed (``mailfathom
dev`` runs a worker in the same process). When the console has a token it is asked
for like the API's: ``Authorization: Bearer <token>`` (Prometheus's ``authorization``
setting). ``/healthz`` answers without a token, 200 or 503, and names only which
checks passed: the details are for ``mailfathom health``.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mailfathom.console.service import Console
from mailfathom.observability import metrics
from mailfathom.observability.gauges import DatabaseGauges
from mailfathom.observability.health import check_store

__all__ = ["routes"]

_lock = threading.Lock()


def _registry(request: Request) -> CollectorRegistry:
    """The console's registry of database gauges, made on the first scrape."""
    with _lock:
        registry: CollectorRegistry | None = getattr(request.app.state, "metrics_registry", None)
        if registry is None:
            mf = _console(request).mf
            registry = CollectorRegistry()
            registry.register(DatabaseGauges(mf.store, mf.clock))
            request.app.state.metrics_registry = registry
        return registry


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _exposition(request: Request) -> bytes:
    body = generate_latest(_registry(request))
    installed = metrics.current()
    if installed is not None:
        body += generate_latest(installed.registry)
    return body


async def metrics_page(request: Request) -> Response:
    """Prometheus text format of the console's metrics."""
    body = await run_in_threadpool(_exposition, request)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def healthz(request: Request) -> Response:
    """200 when the database answers and is migrated, else 503."""
    mf = _console(request).mf
    report = await run_in_threadpool(check_store, mf.store, mf.clock)
    body = {
        "status": "ok" if report.ok else "failing",
        "checks": {check.name: check.ok for check in report.checks},
    }
    return JSONResponse(body, status_code=200 if report.ok else 503)


routes = [
    Route("/metrics", metrics_page, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
]
