"""The email rows: 4 KB messages into Postfix's ``smtp-sink`` on a loopback port.

The ceiling is a plain smtplib loop over one session, no durability. The pipeline
rows time mailfathom's crash-safe path: ``mf.outbox.record_many`` in batches of
:data:`RECORD_BATCH` (durable bytes + the delivery jobs, one transaction per batch),
as an application sending many messages records them; then the worker delivers
(TransmissionBegun written before the body, Sent after the server's 2xx).
``email_record_single`` times ``mf.outbox.record`` one per call (its own commit
each, as a request records one email) on :data:`SINGLE_MESSAGES` messages of their
own. They need ``mf.outbox``; without it they are reported as not measured.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from bench.environment import SmtpSink, ensure_smtp_sink
from bench.runner import DriverError, start_all
from bench.systems import System
from bench.workloads import Bench, Sample

__all__ = [
    "CEILING",
    "RECORD_BATCH",
    "SINGLE_MESSAGES",
    "outbox_available",
    "run_rounds",
    "sink",
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

Measure = Callable[[str, Callable[[], list[Sample]]], None]


def outbox_available() -> bool:
    """Whether this mailfathom has the outbox (``mf.outbox.record``)."""
    import importlib.util

    return importlib.util.find_spec("mailfathom.delivery.outbox") is not None


def systems(selected: Sequence[System], workloads: Sequence[str]) -> list[System]:
    """The email ceiling, when email is among the workloads."""
    return [CEILING] if "email" in workloads else []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def sink(binary: SmtpSink) -> Iterator[int]:
    """A running ``smtp-sink``; yields its port."""
    port = _free_port()
    process = subprocess.Popen(
        binary.command(port),
        env=binary.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stderr = process.stderr.read().decode() if process.stderr else ""
                    raise DriverError(f"smtp-sink did not start: {stderr.strip()}") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def _ceiling(bench: Bench, port: int, round_: int) -> list[Sample]:
    n = bench.sizes.email_messages
    spec = {"task": "send", "port": port, "n": n}
    result = bench.one(CEILING, spec, timeout=60 + n / 100)
    elapsed = float(result["end"]) - float(result["start"])
    return [Sample(CEILING.key, "email", round_, n / elapsed)]


def run_rounds(bench: Bench, systems: Sequence[System], measure: Measure) -> None:
    """Every email row, round after round, against one sink."""
    binary = ensure_smtp_sink()
    pipelines = [s for s in systems if s.key in _PIPELINES] if outbox_available() else []
    if not outbox_available():
        print("email pipeline rows: not measured (this mailfathom has no mf.outbox yet)")
    with sink(binary) as port:
        for round_ in range(1, bench.sizes.rounds + 1):
            measure(f"{CEILING.key} r{round_} email", partial(_ceiling, bench, port, round_))
            for system in pipelines:
                measure(
                    f"{system.key} r{round_} email", partial(_pipeline, bench, system, port, round_)
                )


def _pipeline(bench: Bench, system: System, port: int, round_: int) -> list[Sample]:
    """Record ``email_messages`` (timed), then deliver them all (timed); end to end."""
    n = bench.sizes.email_messages
    python = bench.python(system)
    with bench.fresh(system) as target:
        spec = {**target.spec(), "port": port, "n": n, "concurrency": 10}
        task = {**spec, "task": "record", "install": True, "batch": RECORD_BATCH}
        (recorder,) = start_all(python, _DRIVER, [task])
        recorder.go()
        recorded = recorder.result(timeout=120 + n / 20)
        (worker,) = start_all(python, _DRIVER, [{**spec, "task": "deliver"}])
        worker.go()
        delivered = worker.result(timeout=120 + n / 20)
    if delivered["count"] != n:
        raise DriverError(f"{system.key}: {delivered['count']} of {n} messages reached Sent")
    single_n = min(n, SINGLE_MESSAGES)
    with bench.fresh(system) as target:
        task = {**target.spec(), "port": port, "n": single_n, "task": "record", "install": True}
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
