"""Observability: Prometheus metrics, OpenTelemetry traces, JSON logs and health checks.

- :mod:`~mailfathom.observability.metrics`: the in-process counters and histograms the
  worker's outcome path and the delivery path update, and the hook they call;
- :mod:`~mailfathom.observability.gauges`: gauges read from the database by a cached
  collector (one query batch per ``min_interval`` however often Prometheus scrapes);
- :mod:`~mailfathom.observability.server`: ``/metrics`` and ``/healthz`` on a port of
  the worker's own;
- :mod:`~mailfathom.observability.tracing`: a span per attempt and per SMTP
  submission, when an OpenTelemetry SDK is configured (nothing happens otherwise);
- :mod:`~mailfathom.observability.logs`: ``--log-format json``;
- :mod:`~mailfathom.observability.health`: the checks behind ``mailfathom health``
  and ``/healthz``.

See docs/observability.md.
"""
