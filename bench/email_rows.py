"""The email rows: 4 KB messages into Postfix's ``smtp-sink`` on a loopback port.

The ceiling is a plain smtplib loop over one session, no durability. The pipeline
rows time mailfathom's crash-safe path: ``mf.outbox.record_many`` in batches of
:data:`RECORD_BATCH` (durable bytes + the delivery jobs, one transaction per batch),
as an application sending many messages records them; then the worker delivers
(TransmissionBegun written before the body, Sent after the server's 2xx).
``email_record_single`` times ``mf.outbox.record`` one per call (its own commit
each, as a request records one email) on :data:`SINGLE_MESSAGES` messages of their
own. They need ``mf.outbox``; without it they are reported as not measured.

The ``email_django`` rows (:data:`bench.systems.DJANGO_EMAIL`) time the same steps
through Django's email API, for mailfathom's Django backend and for the durable
Django email queues (django-mailer, django-post_office): ``send_mail`` one per call
as ``email_record_single``, ``send_mass_mail`` in lists of :data:`RECORD_BATCH` as
``email_record``, then each system's own sender as ``email_deliver``
(``bench.drivers.django_email_driver``).

Every row delivers into one :func:`bench.counting_sink.counting_sink`, and every
measurement checks there that each message it sent arrived exactly once; a
mismatch fails the measurement, whatever the system's own table says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from bench.counting_sink import CountingSink, counting_sink
from bench.drivers.django_email_driver import subject as django_subject
from bench.drivers.smtp_loop import subject as loop_subject
from bench.environment import ensure_smtp_sink
from bench.runner import DriverError, start_all
from bench.systems import System
from bench.workloads import Bench, Sample

__all__ = [
    "CEILING",
    "RECORD_BATCH",
    "SINGLE_MESSAGES",
    "outbox_available",
    "run_rounds",
    "systems",
]

CEILING = System(
    "smtplib-loop",
    "ceiling · smtplib loop, no durability",
    "ceiling",
    "none",
    "smtp_loop",
    "project",
    frozenset({"email"}),
    note="one SMTP session, sendmail() per message",
)
_PIPELINES = ("mailfathom-sqlite", "mailfathom-pg")
#: Messages per ``record_many`` call in the pipeline rows.
RECORD_BATCH = 100
#: Messages recorded one per call for the ``email_record_single`` row (not delivered).
SINGLE_MESSAGES = 300
_DRIVER = "mailfathom_email_driver"
_DJANGO_DRIVER = "django_email_driver"

Measure = Callable[[str, Callable[[], list[Sample]]], None]


def outbox_available() -> bool:
    """Whether this mailfathom has the outbox (``mf.outbox.record``)."""
    import importlib.util

    return importlib.util.find_spec("mailfathom.delivery.outbox") is not None


def systems(selected: Sequence[System], workloads: Sequence[str]) -> list[System]:
    """The email ceiling, when email (or email through Django) is among the workloads."""
    return [CEILING] if {"email", "email_django"}.intersection(workloads) else []


def _ceiling(bench: Bench, sink: CountingSink, round_: int) -> list[Sample]:
    n = bench.sizes.email_messages
    spec = {"task": "send", "port": sink.port, "n": n}
    mark = sink.mark()
    result = bench.one(CEILING, spec, timeout=60 + n / 100)
    sink.check(CEILING.key, mark, [loop_subject(i) for i in range(n)])
    elapsed = float(result["end"]) - float(result["start"])
    return [Sample(CEILING.key, "email", round_, n / elapsed)]


def run_rounds(
    bench: Bench, systems: Sequence[System], workloads: Sequence[str], measure: Measure
) -> None:
    """Every email row, round after round, against one counting sink."""
    binary = ensure_smtp_sink()
    pipelines: list[System] = []
    if "email" in workloads:
        pipelines = [s for s in systems if s.key in _PIPELINES] if outbox_available() else []
        if not outbox_available():
            print("email pipeline rows: not measured (this mailfathom has no mf.outbox yet)")
    django = (
        [s for s in systems if s.driver == _DJANGO_DRIVER] if "email_django" in workloads else []
    )
    with counting_sink(binary) as sink:
        for round_ in range(1, bench.sizes.rounds + 1):
            measure(f"{CEILING.key} r{round_} email", partial(_ceiling, bench, sink, round_))
            for system in pipelines:
                measure(
                    f"{system.key} r{round_} email", partial(_pipeline, bench, system, sink, round_)
                )
            for system in django:
                measure(
                    f"{system.key} r{round_} email_django",
                    partial(_django, bench, system, sink, round_),
                )


def _pipeline(bench: Bench, system: System, sink: CountingSink, round_: int) -> list[Sample]:
    """Record ``email_messages`` (timed), then deliver them all (timed); end to end."""
    n = bench.sizes.email_messages
    python = bench.python(system)
    mark = sink.mark()
    with bench.fresh(system) as target:
        spec = {**target.spec(), "port": sink.port, "n": n, "concurrency": 10}
        task = {**spec, "task": "record", "install": True, "batch": RECORD_BATCH}
        (recorder,) = start_all(python, _DRIVER, [task])
        recorder.go()
        recorded = recorder.result(timeout=120 + n / 20)
        (worker,) = start_all(python, _DRIVER, [{**spec, "task": "deliver"}])
        worker.go()
        delivered = worker.result(timeout=120 + n / 20)
    sink.check(system.key, mark, [loop_subject(i) for i in range(n)])
    if delivered["count"] != n:
        raise DriverError(f"{system.key}: {delivered['count']} of {n} messages reached Sent")
    single_n = min(n, SINGLE_MESSAGES)
    with bench.fresh(system) as target:
        task = {
            **target.spec(),
            "port": sink.port,
            "n": single_n,
            "task": "record",
            "install": True,
        }
        (single,) = start_all(python, _DRIVER, [{**task, "batch": 1}])
        single.go()
        one_by_one = single.result(timeout=120 + single_n / 20)
    single_s = float(one_by_one["end"]) - float(one_by_one["start"])
    record_s = float(recorded["end"]) - float(recorded["start"])
    deliver_s = float(delivered["end"]) - float(delivered["start"])
    return [
        Sample(system.key, "email_record", round_, n / record_s),
        Sample(system.key, "email_record_single", round_, single_n / single_s),
        Sample(system.key, "email_deliver", round_, n / deliver_s),
        Sample(system.key, "email", round_, n / (record_s + deliver_s)),
    ]


def _django(bench: Bench, system: System, sink: CountingSink, round_: int) -> list[Sample]:
    """Through Django: ``send_mass_mail`` lists of 100 (timed), then the system's own
    sender (timed), checked at the sink; then ``send_mail`` one per call on a fresh
    database (not delivered)."""
    n = bench.sizes.email_messages
    mark = sink.mark()
    with bench.fresh(system) as target:
        spec = bench.spec(system, target, "deliver", port=sink.port, n=n, batch=RECORD_BATCH)
        done = bench.one(system, spec, timeout=180 + n / 10)
    sink.check(system.key, mark, [django_subject(i) for i in range(n)])
    if done["count"] != n:
        raise DriverError(f"{system.key}: {done['count']} of {n} messages are marked sent")
    single_n = min(n, SINGLE_MESSAGES)
    with bench.fresh(system) as target:
        spec = bench.spec(system, target, "send", port=sink.port, n=single_n)
        singles = bench.one(system, spec, timeout=120 + single_n / 10)
    record_s = float(done["recorded"]) - float(done["start"])
    deliver_s = float(done["end"]) - float(done["recorded"])
    single_s = float(singles["end"]) - float(singles["start"])
    return [
        Sample(system.key, "email_record", round_, n / record_s),
        Sample(system.key, "email_record_single", round_, single_n / single_s),
        Sample(system.key, "email_deliver", round_, n / deliver_s),
        Sample(system.key, "email", round_, n / (record_s + deliver_s)),
    ]
