"""Bad input is refused up front with an error that says what is wrong, and changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email.message import EmailMessage

import pytest

from mailfathom import InvalidInput, InvalidMessage, JobContext, JobState, MailFathom


def nothing(ctx: JobContext) -> None:
    """A handler that does nothing."""


def assert_untouched(mf: MailFathom) -> None:
    assert set(mf.jobs.counts().values()) == {0}
    assert mf.schedules.list() == []


def test_max_attempts_has_one_limit_checked_at_registration(mf: MailFathom) -> None:
    """A kind whose ``max_attempts`` no enqueue would accept is refused when registered."""
    with pytest.raises(InvalidInput, match=r"max_attempts must be an integer from 1 to 10000"):
        mf.job("too.many", max_attempts=10_001)(nothing)
    assert "too.many" not in mf.registry.names()
    mf.job("many", max_attempts=10_000)(nothing)
    job = mf.enqueue("many")
    assert mf.jobs.get(job.id).max_attempts == 10_000
    with pytest.raises(InvalidInput, match=r"max_attempts must be an integer from 1 to 10000"):
        mf.enqueue("many", max_attempts=10_001)
    assert mf.jobs.counts()[JobState.PENDING] == 1


@pytest.mark.parametrize("name", ["k\n", "k\r\n", "\nk", "k\x00", "k\n\n"])
def test_names_with_line_breaks_are_refused(mf: MailFathom, name: str) -> None:
    """Kind, queue and schedule names are matched whole: ``$`` would let a trailing
    newline through."""
    with pytest.raises(InvalidInput, match="job kind"):
        mf.enqueue(name)
    with pytest.raises(InvalidInput, match="job kind"):
        mf.enqueue_many(name, [{}])
    with pytest.raises(InvalidInput, match="queue"):
        mf.enqueue("k", queue=name)
    with pytest.raises(InvalidInput, match="job kind"):
        mf.job(name)(nothing)
    with pytest.raises(InvalidInput, match="queue"):
        mf.job("k", queue=name)(nothing)
    with pytest.raises(InvalidInput, match="schedule name"):
        mf.schedule(name, cron="* * * * *", kind="k")
    with pytest.raises(InvalidInput, match="job kind"):
        mf.schedule("s", cron="* * * * *", kind=name)
    with pytest.raises(InvalidInput, match="queue"):
        mf.schedule("s", cron="* * * * *", kind="k", queue=name)
    with pytest.raises(InvalidInput, match="job kind"):
        mf.jobs.list(kind=name)
    with pytest.raises(InvalidInput, match="queue"):
        mf.jobs.list(queue=name)
    with pytest.raises(InvalidInput, match="schedule name"):
        mf.schedules.get(name)
    with pytest.raises(InvalidInput, match="schedule name"):
        mf.schedules.pause(name, actor="ops")
    assert mf.registry.names() == ["mailfathom.deliver"]
    assert mf.schedules.declared() == []
    mf.schedules.sync()
    assert_untouched(mf)


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 0 31 2 *", "never fires"),  # 31 February
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),  # months with 30 days
        ("0 0 * * * 0 2030", "a year field is not supported"),  # seven fields
        ("0 0 1 1 * 0 2020-2030", "a year field is not supported"),
        ("0 0 * *", "not a valid cron expression"),
        ("0 0 * * * * * *", "not a valid cron expression"),
    ],
)
def test_cron_expressions_that_cannot_fire_or_have_a_year_are_refused(
    mf: MailFathom, cron: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        mf.schedule("s", cron=cron, kind="k")
    assert mf.schedules.declared() == []
    mf.schedules.sync()
    assert_untouched(mf)


@pytest.mark.parametrize(
    "cron", ["0 0 29 2 *", "0 0 31 2 1", "@daily", "@hourly", "* * * * * */10", "0 0 L 2 *"]
)
def test_cron_expressions_that_fire_are_accepted(mf: MailFathom, cron: str) -> None:
    """29 February fires in leap years; with a weekday too, cron fires on either."""
    mf.schedule("s", cron=cron, kind="k")
    assert mf.schedules.sync() == ["s"]


def test_run_at_and_delay_out_of_range_name_the_end_they_miss(mf: MailFathom) -> None:
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))  # 31 December of year 0 UTC
    with pytest.raises(InvalidInput, match=r"before the year 1 in UTC"):
        mf.enqueue("k", run_at=early)
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-2)))
    with pytest.raises(InvalidInput, match=r"past the year 9999 in UTC"):
        mf.enqueue("k", run_at=late)
    for huge in (1e20, 10**30, timedelta(days=999_999_999)):
        with pytest.raises(InvalidInput, match=r"past the year 9999"):
            mf.enqueue("k", delay=huge)
    for negative in (-1e20, -(10**30), -1, timedelta(days=-999_999_999)):
        with pytest.raises(InvalidInput, match=r"delay must be zero or positive"):
            mf.enqueue("k", delay=negative)
    assert_untouched(mf)
    # The ends themselves are fine (a run_at in the past runs at once).
    first = mf.enqueue("k", run_at=datetime(1, 1, 1, tzinfo=UTC))
    last = mf.enqueue("k", run_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert mf.jobs.get(first.id).available_at == datetime(1, 1, 1, tzinfo=UTC)
    assert mf.jobs.get(last.id).available_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_a_header_field_name_ending_in_a_newline_is_refused_by_name(mf: MailFathom) -> None:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "x"
    message["X-Note\n"] = "injected"
    message.set_content("hello")
    with pytest.raises(InvalidMessage, match=r"header field name 'X-Note\\n' is not printable"):
        mf.outbox.record(message)
    assert mf.outbox.list() == []
