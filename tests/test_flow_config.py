"""Flow control's inputs: rates, limits, per-queue slots and ``--queues`` parsing, each bad
value a clear error that names the fix and changes nothing; per-queue slots in a worker."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from click.testing import CliRunner

from mailfathom import InvalidInput, JobContext, MailFathom
from mailfathom.cli import cli
from mailfathom.jobs.flow.limits import FlowLimit, Rate, parse_queues, parse_rate


@pytest.mark.parametrize(
    ("text", "count", "window"),
    [
        ("100/min", 100, timedelta(minutes=1)),
        ("20/s", 20, timedelta(seconds=1)),
        ("5/10s", 5, timedelta(seconds=10)),
        (" 1000 / hour ", 1000, timedelta(hours=1)),
        ("3/2minutes", 3, timedelta(minutes=2)),
        ("1/d", 1, timedelta(days=1)),
        ("7/250ms", 7, timedelta(milliseconds=250)),
    ],
)
def test_rates_parse(text: str, count: int, window: timedelta) -> None:
    assert parse_rate(text) == Rate(count, window)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "is not a rate: write a rate as"),
        ("0/min", "allows 0 starts: give 1 to"),
        ("10/fortnight", "is not a rate"),
        ("10/0s", "the window must be from 1 ms to 1 day"),
        ("10/2d", "the window must be from 1 ms to 1 day"),
        (-1, "must be a string such as '100/min'"),
        ("-1/s", "is not a rate"),
    ],
)
def test_bad_rates_are_clear_errors(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_rate(value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_running": 0}, "max_running must be an integer from 1 to"),
        ({"max_running": -3}, "max_running must be an integer from 1 to"),
        ({"max_running": True}, "max_running must be an integer"),
        ({"max_running": 2.5}, "max_running must be an integer"),
        ({"max_running_per_key": 0}, "max_running_per_key must be an integer"),
        ({"rate_per_key": "x"}, "rate_per_key 'x' is not a rate"),
        ({"key_limits": {"a": {"connections": 2}}}, r"key_limits\['a'\] must be a mapping"),
        ({"key_limits": {"a": {}}}, r"key_limits\['a'\] sets nothing"),
        ({"key_limits": {"": {"max_running": 1}}}, "must be 1-200 characters"),
        ({"key_limits": ["a"]}, "key_limits must map a limit key"),
    ],
)
def test_bad_limits_are_clear_errors(values: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        FlowLimit.build("kind", "k", **values)  # type: ignore[arg-type]


def test_nothing_set_is_no_limit() -> None:
    assert FlowLimit.build("kind", "k") is None


def test_bad_declarations_change_nothing(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match="sets per-key limits without limit_key: give"):

        @mf.job("a", max_running_per_key=1)
        def a(ctx: JobContext) -> None: ...

    with pytest.raises(InvalidInput, match="0/min"):

        @mf.job("b", rate="0/min")
        def b(ctx: JobContext) -> None: ...

    with pytest.raises(InvalidInput, match="limit_key of 'c' must be a function"):

        @mf.job("c", limit_key="account", max_running_per_key=1)  # type: ignore[arg-type]
        def c(ctx: JobContext) -> None: ...

    with pytest.raises(InvalidInput, match="queue 'bad name' is not usable"):
        mf.limit_queue("bad name", max_running=1)
    assert mf.registry.names() == ["mailfathom.deliver"]
    assert mf.limits.declared() == []
    mf.limits.sync()
    assert mf.limits.stored() == []


def test_queue_slots_and_names_parse() -> None:
    assert parse_queues("mail,default") == ["mail", "default"]
    assert parse_queues("mail=5, default=20") == {"mail": 5, "default": 20}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mail=0", "queue 'mail' has 0 slots: give each queue a whole number"),
        ("mail=x", "queue 'mail' has 'x' slots"),
        ("mail=-1", "queue 'mail' has '-1' slots"),
        ("mail=5,default", "mixes queues with and without slots"),
        ("mail=1,mail=2", "is given twice"),
        (" , ", "give at least one queue name"),
        ("=3", "queue '' is not usable"),
    ],
)
def test_bad_queue_slots_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_queues(text)


def test_worker_refuses_bad_slots(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match="queue 'mail' has 0 slots"):
        mf.worker(queues={"mail": 0})
    with pytest.raises(InvalidInput, match="differs from the 7 slots"):
        mf.worker(concurrency=3, queues={"mail": 2, "default": 5})
    worker = mf.worker(queues={"mail": 2, "default": 5})
    assert (worker.concurrency, worker.queues, worker.slots) == (
        7,
        ["mail", "default"],
        {"mail": 2, "default": 5},
    )


def test_cli_refuses_bad_queue_slots(database_url: str) -> None:
    result = CliRunner().invoke(
        cli, ["worker", "--app", "worker_app:mf", "--database", database_url, "--queues", "a=0"]
    )
    assert result.exit_code == 2
    assert "queue 'a' has 0 slots" in result.output


def test_a_worker_runs_at_most_each_queue_slots(mf: MailFathom) -> None:
    gate = threading.Event()
    lock = threading.Lock()
    running = {"mail": 0, "default": 0}
    most = {"mail": 0, "default": 0}
    all_slots = threading.Event()

    def run(queue: str) -> None:
        with lock:
            running[queue] += 1
            most[queue] = max(most[queue], running[queue])
            if sum(running.values()) == 5:
                all_slots.set()
        assert gate.wait(10)
        with lock:
            running[queue] -= 1

    @mf.job("m", queue="mail")
    def m(ctx: JobContext) -> None:
        run("mail")

    @mf.job("d")
    def d(ctx: JobContext) -> None:
        run("default")

    mf.enqueue_many("m", [{}] * 6)
    mf.enqueue_many("d", [{}] * 6)
    worker = mf.worker(queues={"mail": 2, "default": 3})
    worker.signals.init()
    thread = threading.Thread(target=lambda: worker.run(burst=True))
    thread.start()
    try:
        assert all_slots.wait(10)
        for _ in range(2):  # two passes of the loop with every slot busy: no more claimed
            worker.signals.loop_waits.wait_for(lambda load: load.running == 5)
        with lock:
            assert running == {"mail": 2, "default": 3}
        gate.set()
        assert worker.signals.stopped.wait() == 12
    finally:
        gate.set()
        worker.stop()
        thread.join(30)
    assert most == {"mail": 2, "default": 3}


def test_a_claim_held_back_by_limits_is_tried_again_soon() -> None:
    from mailfathom.jobs.worker.claim_ahead import ReadyJobs
    from mailfathom.jobs.worker.pacing import FLOW_RETRY, ClaimPacer, Load

    idle = Load(running=0, ready=0, unrecorded=0, unrecorded_age=0.0)
    pacer = ClaimPacer(10, 1.0, ReadyJobs(10))
    pacer.claimed(100.0, 10, 2, reaped=False, held_back=True)
    assert pacer.wanted(100.0 + FLOW_RETRY / 2, idle) == 0
    assert pacer.wait_time(100.0, idle) == pytest.approx(FLOW_RETRY)
    assert pacer.wanted(100.0 + FLOW_RETRY, idle) == 10  # a slot may have freed elsewhere
    pacer.claimed(200.0, 10, 2, reaped=False)  # short for want of jobs: the poll interval
    assert pacer.wanted(200.0 + FLOW_RETRY, idle) == 0
    assert pacer.wait_time(200.0, idle) == pytest.approx(1.0)
