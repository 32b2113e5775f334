"""Observability: Prometheus metrics, OpenTelemetry traces, JSON logs and health checks.

A public module: import what it offers from ``mailfathom.observability`` itself (its
``__all__``). Its submodules are internal, each with one job:

- ``metrics``: the in-process counters and histograms the worker's outcome path and the
  delivery path update (:func:`install_metrics`, :class:`Metrics`);
- ``gauges``: gauges read from the database by a cached collector (one query batch per
  ``min_interval`` however often Prometheus scrapes; :func:`database_gauges`);
- ``server``: ``/metrics`` and ``/healthz`` on a port of the worker's own
  (:class:`MetricsServer`, :func:`serve_worker_metrics`);
- ``tracing``: a span per attempt and per SMTP submission, when an OpenTelemetry SDK is
  configured (nothing happens otherwise; :func:`set_tracer_provider`);
- ``logs``: ``--log-format json`` (:class:`JsonFormatter`, :func:`configure_logging`);
- ``health``: the checks behind ``mailfathom health`` and ``/healthz``
  (:func:`check_app`, :func:`check_url`, :class:`Report`).

The names are loaded when first used, so importing the worker's hooks stays cheap and
free of import cycles. See docs/observability.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailfathom.observability.app_probes import check_app as check_app
    from mailfathom.observability.app_probes import database_gauges as database_gauges
    from mailfathom.observability.gauges import DatabaseGauges as DatabaseGauges
    from mailfathom.observability.health import Check as Check
    from mailfathom.observability.health import Report as Report
    from mailfathom.observability.health import check_url as check_url
    from mailfathom.observability.logs import JsonFormatter as JsonFormatter
    from mailfathom.observability.logs import configure as configure_logging
    from mailfathom.observability.metrics import Metrics as Metrics
    from mailfathom.observability.metrics import install as install_metrics
    from mailfathom.observability.metrics import uninstall as uninstall_metrics
    from mailfathom.observability.server import MetricsServer as MetricsServer
    from mailfathom.observability.server import serve_worker_metrics as serve_worker_metrics
    from mailfathom.observability.tracing import set_provider as set_tracer_provider

__all__ = [
    "Check",
    "DatabaseGauges",
    "JsonFormatter",
    "Metrics",
    "MetricsServer",
    "Report",
    "check_app",
    "check_url",
    "configure_logging",
    "database_gauges",
    "install_metrics",
    "serve_worker_metrics",
    "set_tracer_provider",
    "uninstall_metrics",
]

#: Each public name: the internal submodule that defines it, and its name there.
_WHERE: dict[str, tuple[str, str]] = {
    "Check": ("health", "Check"),
    "DatabaseGauges": ("gauges", "DatabaseGauges"),
    "JsonFormatter": ("logs", "JsonFormatter"),
    "Metrics": ("metrics", "Metrics"),
    "MetricsServer": ("server", "MetricsServer"),
    "Report": ("health", "Report"),
    "check_app": ("app_probes", "check_app"),
    "check_url": ("health", "check_url"),
    "configure_logging": ("logs", "configure"),
    "database_gauges": ("app_probes", "database_gauges"),
    "install_metrics": ("metrics", "install"),
    "serve_worker_metrics": ("server", "serve_worker_metrics"),
    "set_tracer_provider": ("tracing", "set_provider"),
    "uninstall_metrics": ("metrics", "uninstall"),
}


def __getattr__(name: str) -> Any:
    """Load a public name from its submodule on first use (PEP 562)."""
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names with the module's own, for ``dir()`` and completion."""
    return sorted(set(globals()) | set(__all__))
