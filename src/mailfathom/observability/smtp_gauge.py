"""``mailfathom_smtp_configuration_error``: 1 while this process's deliveries are paused
by an SMTP configuration error, 0 otherwise.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A wrong password, credentials with no STARTTLS or AUTH to give them to, or a server
that requires an authentication the URL does not give: deliveries then wait without
spending attempts (docs/outbox.md, "Configuration errors"), so nothing fails and the
queue only grows; alert on this gauge (``max`` across instances) instead.
``mailfathom_smtp_configuration_error_since_seconds`` says since when (Unix time, 0
when there is none).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:  # the type only: observability imports no delivery code at run time
    from mailfathom.delivery.smtp_config import ConfigurationGate

__all__ = ["SmtpConfigurationGauge"]


class SmtpConfigurationGauge(Collector):
    """A Prometheus collector of one :class:`ConfigurationGate` (the deliverer's)."""

    def __init__(self, gate: ConfigurationGate) -> None:
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        """The gauges, read from the gate at each scrape (no I/O)."""
        fault = self._gate.fault
        yield GaugeMetricFamily(
            "mailfathom_smtp_configuration_error",
            "1 while deliveries are paused by an SMTP configuration error (no attempt spent)",
            value=0 if fault is None else 1,
        )
        yield GaugeMetricFamily(
            "mailfathom_smtp_configuration_error_since_seconds",
            "Unix time the SMTP configuration error in force was first seen (0: none)",
            value=0 if fault is None else fault.since,
        )
