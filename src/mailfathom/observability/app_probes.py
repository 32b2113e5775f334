"""The database gauges and health checks of one application, built from its ``MailFathom``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

:class:`~mailfathom.observability.gauges.DatabaseGauges` and
:func:`~mailfathom.observability.health.check_store` read the application's store; these
take the application itself, so code outside mailfathom never reaches for its store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailfathom.observability.gauges import DatabaseGauges
from mailfathom.observability.health import Report, check_store

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["check_app", "database_gauges"]


def database_gauges(
    app: MailFathom,
    *,
    min_interval: float = 10.0,
    history_interval: float = 300.0,
    max_duty: float | None = 0.02,
) -> DatabaseGauges:
    """The Prometheus collector of ``app``'s database numbers, to register in a registry.

    It reads at most once per ``min_interval`` seconds however often it is scraped, the
    ever-growing terminal counts once per ``history_interval``, and spends at most
    ``max_duty`` of the time reading (None: no limit beyond the intervals).
    """
    return DatabaseGauges(
        app.store,
        app.clock,
        min_interval=min_interval,
        history_interval=history_interval,
        max_duty=max_duty,
    )


def check_app(app: MailFathom, *, worker_id: str | None = None) -> Report:
    """The health checks of ``app``'s database (answers, migrated) and, given
    ``worker_id``, that worker's heartbeat: what ``/healthz`` and ``mailfathom health`` run."""
    return check_store(app.store, app.clock, worker_id=worker_id)
