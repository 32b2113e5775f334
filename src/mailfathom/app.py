"""``MailFathom``: the composition root that users hold.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

It resolves settings, opens the store, and exposes the queue (``enqueue``,
``enqueue_many``, ``@job``), recurring schedules (``schedule``, ``schedules``),
the operator views (``jobs``, ``workers``), the outbox (``outbox``, delivered by
the ``mailfathom.deliver`` job kind) and the worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

from mailfathom.batch_ids import BatchIds
from mailfathom.clock import Clock, SystemClock, check_clock, check_clock_skew
from mailfathom.config import Settings
from mailfathom.delivery.deliver import DELIVER_KIND, DELIVERY_BACKOFF, Deliverer
from mailfathom.delivery.domains import delivery_key
from mailfathom.delivery.outbox import Outbox
from mailfathom.delivery.smtp_url import parse_smtp_url
from mailfathom.delivery.suppressions import Suppressions
from mailfathom.delivery.transport import Transport
from mailfathom.errors import InvalidInput
from mailfathom.jobs.admin.admin import Jobs
from mailfathom.jobs.admin.limits import Limits
from mailfathom.jobs.admin.queues import Queues
from mailfathom.jobs.admin.workers import Workers
from mailfathom.jobs.flow.limits import FlowLimit, KeyFunction
from mailfathom.jobs.model import EnqueuedJob
from mailfathom.jobs.pruner import (
    WORKER_DUTY,
    WORKER_IDLE_DUTY,
    PeriodicPruner,
    Progress,
    Pruner,
    PruneReport,
)
from mailfathom.jobs.queue import JobQueue
from mailfathom.jobs.registry import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    Isolation,
    Registry,
    build_kind,
)
from mailfathom.jobs.retry import Backoff
from mailfathom.jobs.schedules.schedule_admin import Schedules
from mailfathom.jobs.worker.worker import Worker
from mailfathom.redact import guard_logs
from mailfathom.store import open_store
from mailfathom.store.outbox.rows import DeliveryJobSpec

__all__ = ["MailFathom"]

F = TypeVar("F", bound=Callable[..., Any])
#: The keywords of ``MailFathom(...)`` that are settings: every field of Settings.
_SETTING_NAMES = frozenset(field.name for field in fields(Settings))


class MailFathom:
    """A durable job queue (and outbox) on one database.

    ``MailFathom("sqlite:///app.db")`` or ``MailFathom("postgresql://…")``; with no
    URL, ``MAILFATHOM_DATABASE_URL``, then ``mailfathom.toml``, then
    ``sqlite:///mailfathom.db``. Call :meth:`migrate` once before use.

    Every keyword after ``transport`` is the :class:`~mailfathom.Settings` field of that
    name, with its type (``MailFathom(url, concurrency=20, lease=60.0)``): given, it wins
    over the environment and ``mailfathom.toml``; None or left out, the setting comes
    from them, then from its default. A bad value raises :class:`ConfigurationError`
    naming the setting. ``settings=`` hands over settings already made (the keywords are
    then not read). ``clock``: the time source (a :class:`FakeClock` in tests).
    ``transport``: what submits outgoing email (a :class:`~mailfathom.Transport`, e.g. a
    provider's HTTP API); left out, the SMTP server of ``smtp_url``.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        transport: Transport | None = None,
        sqlite_busy_timeout: float | None = None,
        enqueue_timeout: float | None = None,
        smtp_url: str | None = None,
        max_payload_bytes: int | None = None,
        strict_kinds: bool | None = None,
        snooze_limit: int | None = None,
        concurrency: int | None = None,
        lease: float | None = None,
        clock_skew: float | None = None,
        shutdown_timeout: float | None = None,
        smtp_timeout: float | None = None,
        smtp_data_timeout: float | None = None,
        smtp_sessions: int | None = None,
        smtp_config_retry: float | None = None,
        delivery_max_attempts: int | None = None,
        delivery_queue: str | None = None,
        domain_limits: Mapping[str, Mapping[str, Any]] | None = None,
        max_message_bytes: int | None = None,
        dkim_domain: str | None = None,
        dkim_selector: str | None = None,
        dkim_key_file: str | None = None,
        web_host: str | None = None,
        web_port: int | None = None,
        web_token: str | None = None,
        web_secure_cookies: bool | None = None,
        sns_topic_arns: str | None = None,
        retention: Mapping[str, Any] | None = None,
        retention_kinds: Mapping[str, Mapping[str, Any]] | None = None,
        email_retention: Mapping[str, Any] | None = None,
        audit_retention: str | float | None = None,
        retention_delete_keyless: bool | None = None,
        prune_interval: float | None = None,
        prune_batch: int | None = None,
    ) -> None:
        guard_logs()  # connection warnings (the driver's included) never show a password
        if settings is None:
            # the keywords named like a field of Settings, as the caller gave them
            given = {name: value for name, value in locals().items() if name in _SETTING_NAMES}
            settings = Settings.load(given)
        self.settings = settings
        self.clock: Clock = check_clock(clock) if clock is not None else SystemClock()
        skew = check_clock_skew(settings.clock_skew)
        # Rate windows are judged on the database's clock, shared by every machine; an app
        # on a clock of its own (a FakeClock) judges them on that clock, which it moves.
        own = None if isinstance(self.clock, SystemClock) else self.clock
        self.store = open_store(
            settings.database_url,
            clock_skew=skew,
            sqlite_busy_timeout=settings.sqlite_busy_timeout,
            enqueue_timeout=settings.enqueue_timeout,
            database_clock=own,
        )
        self.registry = Registry(strict=settings.strict_kinds)
        self.queue = JobQueue(
            self.store,
            self.registry,
            self.clock,
            max_payload_bytes=settings.max_payload_bytes,
            snooze_limit=settings.snooze_limit,
        )
        self.jobs = Jobs(self.store.jobs, self.clock)
        #: Pause and resume queues fleet-wide (``mf.queues.pause("mail", actor=…)``).
        self.queues = Queues(self.store.controls, self.clock)
        #: Flow-control limits: declared here, stored for the fleet (docs/worker.md).
        self.limits = Limits(self.store.flow, self.registry, self.clock)
        self.schedules = Schedules(self.queue, self.clock)
        self.workers = Workers(self.store.workers, self.clock, clock_skew=skew)
        self.retention = self.store.retention
        self._policy = settings.retention_policy()
        self._init_outbox(settings, transport)

    def _init_outbox(self, settings: Settings, transport: Transport | None) -> None:
        """``mf.outbox`` and the ``mailfathom.deliver`` kind, on the queue's own database."""
        delivery_job = DeliveryJobSpec(
            kind=DELIVER_KIND,
            queue=settings.delivery_queue,
            max_attempts=settings.delivery_max_attempts,
            key_of=delivery_key,
        )
        throttle = settings.domain_throttle()
        if throttle is not None:  # the deliver kind's per-key limits, keyed by domain
            self.limit_kind(DELIVER_KIND, **throttle.flow_values())
        self.outbox = Outbox(
            self.store.outbox,
            self.store.outbox_moves,
            self.clock,
            job=delivery_job,
            signer=settings.dkim_signer(),
            max_message_bytes=settings.max_message_bytes,
            split_domains=throttle is not None,
        )
        #: The addresses never sent to again (hard bounces, complaints, operators' calls).
        self.suppressions = Suppressions(self.store.suppressions, self.clock)
        self.deliverer = Deliverer(
            self.store.outbox_attempts,
            self.store.outbox,
            self.clock,
            target=None if settings.smtp_url is None else parse_smtp_url(settings.smtp_url),
            job=delivery_job,
            timeout=settings.smtp_timeout,
            data_timeout=settings.smtp_data_timeout,
            sessions=settings.smtp_sessions,
            config_retry=settings.smtp_config_retry,
            snooze_limit=settings.snooze_limit,
            transport=transport,
            suppressions=self.suppressions,
        )
        attempts = self.store.outbox_attempts
        if attempts.counts_at_claim():  # a delivery's attempt counted by its claim
            suppressions = self.suppressions
            attempts.read_suppressions_at_claim(
                lambda cursor, addresses: suppressions.among(addresses, cursor=cursor)
            )
            self.store.claims.add_claim_hook(DELIVER_KIND, attempts.start_claimed)
            self.store.claims.add_release_hook(attempts.unstart_released)
        # A delivery's Sent commits with its job's completion (the worker's batch of them).
        self.store.claims.add_outcome_hook(attempts.write_ends_with_outcomes())
        self.registry.add(
            build_kind(
                DELIVER_KIND,
                self.deliverer.handle,
                queue=settings.delivery_queue,
                max_attempts=settings.delivery_max_attempts,
                backoff=DELIVERY_BACKOFF,
            )
        )

    @classmethod
    def from_env(cls, *, clock: Clock | None = None) -> MailFathom:
        """Every setting from ``MAILFATHOM_*`` and ``mailfathom.toml``."""
        return cls(clock=clock)

    def migrate(self) -> list[str]:
        """Create or upgrade the schema; idempotent and safe to race. Returns what was applied."""
        return self.store.migrate()

    def close(self) -> None:
        """Release the database connections and any idle SMTP connection."""
        self.deliverer.close()
        self.store.close()

    def __enter__(self) -> MailFathom:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- jobs --------------------------------------------------------------------------

    def job(
        self,
        kind: str,
        *,
        queue: str = DEFAULT_QUEUE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout: float | timedelta | None = None,
        backoff: Backoff | None = None,
        permanent: tuple[type[BaseException], ...] = (),
        isolation: Isolation = "thread",
        retention: Mapping[str, Any] | str | float | None = None,
        max_running: int | None = None,
        rate: str | None = None,
        limit_key: KeyFunction | None = None,
        max_running_per_key: int | None = None,
        rate_per_key: str | None = None,
        key_limits: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of ``kind``.

        The handler is called as ``handler(ctx, **payload)``. Exceptions whose type
        is in ``permanent`` dead-letter at once; others retry with ``backoff``.
        ``retention`` gives the kind its own periods: ``{"Succeeded": "1d"}``, or one
        period for Succeeded and Dropped (docs/retention.md).

        Flow control, fleet-wide (docs/worker.md): at most ``max_running`` of this
        kind run at once, at most ``rate`` ("100/min") start in any such window; with
        ``limit_key`` (a function of the payload returning a str or int, computed at
        enqueue), at most ``max_running_per_key`` / ``rate_per_key`` per key, and
        ``key_limits={"key": {"max_running": 2, "rate": "20/s"}}`` for particular keys.
        """
        limit = FlowLimit.build(
            "kind",
            kind,
            max_running=max_running,
            rate=rate,
            max_running_per_key=max_running_per_key,
            rate_per_key=rate_per_key,
            key_limits=key_limits,
        )
        if limit is not None and limit.per_key and limit_key is None:
            raise InvalidInput(
                f"job kind {kind!r} sets per-key limits without limit_key: give "
                "limit_key=lambda payload: payload['<field>'] (the key of each job)"
            )
        if retention is not None:
            self._policy = self._policy.with_kind(kind, retention)

        def register(handler: F) -> F:
            self.registry.add(
                build_kind(
                    kind,
                    handler,
                    queue=queue,
                    max_attempts=max_attempts,
                    timeout=timeout,
                    backoff=backoff,
                    permanent=permanent,
                    isolation=isolation,
                    limit_key=limit_key,
                    max_result_bytes=self.settings.max_payload_bytes,
                )
            )
            if limit is not None:
                self.limits.declare(limit)
            return handler

        return register

    def limit_queue(
        self,
        queue: str,
        *,
        max_running: int | None = None,
        rate: str | None = None,
        max_running_per_key: int | None = None,
        rate_per_key: str | None = None,
        key_limits: Mapping[str, Any] | None = None,
    ) -> None:
        """Limit a whole queue fleet-wide, whatever the kinds in it: at most
        ``max_running`` of its jobs at once, at most ``rate`` ("100/min") starts per
        window, and per limit key (the jobs' keys, from their kinds' ``limit_key``).

        Validated now; written when a worker starts (or by ``mf.limits.sync()``).
        Giving no value at all withdraws this app's declaration (``mf.limits.remove``
        deletes the stored limit).
        """
        self.limits.declare_values(
            "queue",
            queue,
            max_running=max_running,
            rate=rate,
            max_running_per_key=max_running_per_key,
            rate_per_key=rate_per_key,
            key_limits=key_limits,
        )

    def limit_kind(
        self,
        kind: str,
        *,
        max_running: int | None = None,
        rate: str | None = None,
        max_running_per_key: int | None = None,
        rate_per_key: str | None = None,
        key_limits: Mapping[str, Any] | None = None,
    ) -> None:
        """Limit a kind registered elsewhere (``mailfathom.deliver``, say), as
        ``@mf.job(max_running=..., rate=...)`` would; per-key limits apply to the keys
        its jobs carry (set by whoever enqueues them)."""
        self.limits.declare_values(
            "kind",
            kind,
            max_running=max_running,
            rate=rate,
            max_running_per_key=max_running_per_key,
            rate_per_key=rate_per_key,
            key_limits=key_limits,
        )

    def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        queue: str | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
    ) -> EnqueuedJob:
        """Enqueue one job; an existing ``idempotency_key`` returns that job (``created=False``).

        Higher ``priority`` runs first. ``hold=True`` waits for an operator's release.
        With ``connection=`` the job is written in the caller's open transaction.
        """
        return self.queue.enqueue_one(
            kind,
            payload,
            idempotency_key=idempotency_key,
            queue=queue,
            priority=priority,
            delay=delay,
            run_at=run_at,
            hold=hold,
            max_attempts=max_attempts,
            connection=connection,
        )

    @overload
    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        returning: Literal["jobs"] = "jobs",
    ) -> list[EnqueuedJob]: ...

    @overload
    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        returning: Literal["ids"],
    ) -> BatchIds: ...

    def enqueue_many(
        self,
        kind: str,
        payloads: Iterable[Mapping[str, Any] | None],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        queue: str | None = None,
        priority: int = 0,
        delay: timedelta | float | None = None,
        run_at: datetime | None = None,
        hold: bool = False,
        max_attempts: int | None = None,
        connection: object | None = None,
        returning: Literal["jobs", "ids"] = "jobs",
    ) -> list[EnqueuedJob] | BatchIds:
        """Enqueue a batch in one transaction; results are in the order of ``payloads``.

        ``payloads`` (and ``idempotency_keys``) may be any iterable, a generator
        included: it is read 10,000 jobs at a time. ``returning="jobs"`` (the default)
        returns a list of :class:`EnqueuedJob`; ``returning="ids"`` a :class:`BatchIds`
        (each job's id, 8 bytes a job), so that a batch of any size holds a chunk's
        worth of memory.
        """
        options: dict[str, Any] = {
            "idempotency_keys": idempotency_keys,
            "queue": queue,
            "priority": priority,
            "delay": delay,
            "run_at": run_at,
            "hold": hold,
            "max_attempts": max_attempts,
            "connection": connection,
        }
        if returning == "ids":
            return self.queue.enqueue_many(kind, payloads, returning="ids", **options)
        return self.queue.enqueue_many(kind, payloads, returning=returning, **options)

    def schedule(
        self,
        name: str,
        *,
        cron: str,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        timezone: str = "UTC",
        queue: str | None = None,
    ) -> None:
        """Declare a recurring schedule: enqueue ``kind`` with ``payload`` at each ``cron`` tick.

        ``cron`` is read in ``timezone`` (five fields, or six with seconds last);
        across daylight-saving changes it runs as cron runs it (docs/worker.md).
        Validated now; written to the database when a worker starts (or by
        ``mf.schedules.sync()``). Each tick is enqueued once across every worker,
        with the idempotency key ``schedule:<name>:<tick, ISO UTC>``; after downtime
        only the latest missed tick runs. Pause with ``mf.schedules.pause(name, ...)``.
        """
        self.schedules.declare(
            name, cron=cron, kind=kind, payload=payload, timezone=timezone, queue=queue
        )

    def pruner(self, *, duty: float = 1.0, idle_duty: float | None = None) -> Pruner:
        """A pruner for this app's retention rules (settings plus ``@job(retention=)``);
        ``duty`` < 1 rests between batches, ``idle_duty`` is the duty while no due job
        waits (a worker's thread uses ``WORKER_DUTY`` and ``WORKER_IDLE_DUTY``)."""
        return Pruner(
            self.retention,
            self.clock,
            self._policy,
            batch_size=self.settings.prune_batch,
            duty=duty,
            idle_duty=idle_duty,
        )

    def prune(self, *, dry_run: bool = False, progress: Progress | None = None) -> PruneReport:
        """One pruning pass now: compact (or, by opt-in, delete) what retention says is old.

        ``dry_run=True`` only counts what a pass would do and changes nothing. The report
        gives rows per table, state and action; ``ran`` is False when another pruner
        (a worker, most likely) holds the lease.
        """
        return self.pruner().run(dry_run=dry_run, progress=progress)

    def worker(
        self,
        concurrency: int | None = None,
        queues: Sequence[str] | Mapping[str, int] | None = None,
        *,
        lease: float | None = None,
        shutdown_timeout: float | None = None,
        poll_interval: float = 1.0,
    ) -> Worker:
        """A worker for this app's registered kinds; call ``.run()`` or ``.run(burst=True)``.

        Unset arguments come from the settings (10 at a time, every queue, 30 s
        lease, 30 s shutdown grace). ``queues={"mail": 5, "default": 20}`` gives each
        queue its own slots (``concurrency`` is then their sum). The worker writes this
        app's flow-control limits (``mf.limits``) for the fleet when it starts.
        ``poll_interval`` bounds how long an idle worker waits between claims when no
        wake-up arrives.
        """
        if concurrency is None and not isinstance(queues, Mapping):
            concurrency = self.settings.concurrency
        return Worker(
            self.queue,
            concurrency=concurrency,
            queues=queues,
            lease=self.settings.lease if lease is None else lease,
            shutdown_timeout=(
                self.settings.shutdown_timeout if shutdown_timeout is None else shutdown_timeout
            ),
            poll_interval=poll_interval,
            schedules=self.schedules.declared(),
            pruner=self._periodic_pruner(),
            limits=self.limits,
        )

    def _periodic_pruner(self) -> PeriodicPruner | None:
        """The worker's pruning thread (None when ``prune_interval`` is 0)."""
        if not self.settings.prune_interval:
            return None
        return PeriodicPruner(
            self.pruner(duty=WORKER_DUTY, idle_duty=WORKER_IDLE_DUTY),
            self.clock,
            interval=self.settings.prune_interval,
        )
