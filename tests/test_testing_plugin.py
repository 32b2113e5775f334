"""mailfathom.testing, the pytest plugin, run by pytester as a user's suite would run it."""

from __future__ import annotations

import pytest

USERS_TESTS = """
from email.message import EmailMessage

import pytest

from mailfathom import JobState


def welcome(to):
    message = EmailMessage()
    message["From"] = "app@example.com"
    message["To"] = to
    message["Subject"] = "Welcome"
    message.set_content("Hello.")
    return message


def test_enqueue_drain_and_mail(mailfathom):
    mf = mailfathom.mf
    ran = []

    @mf.job("accounts.welcome")
    def send_welcome(ctx, user_id, to, plan):
        ran.append(user_id)
        mf.outbox.record(welcome(to))

    mf.enqueue("accounts.welcome", {"user_id": 7, "to": "ada@example.org", "plan": "pro"})
    job = mailfathom.assert_enqueued("accounts.welcome", user_id=7)
    assert job.payload["plan"] == "pro"
    mailfathom.mail.assert_nothing_sent()
    assert mailfathom.drain() == 2  # the job, then the delivery of the email it recorded
    assert ran == [7]
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    (message,) = mailfathom.mail.assert_sent(to="ada@example.org", subject="Welcome")
    assert message.parsed().get_content().strip() == "Hello."


def test_each_test_starts_empty(mailfathom, mailfathom_database_url, tmp_path):
    mailfathom.assert_nothing_enqueued()
    mailfathom.mail.assert_nothing_sent()
    assert str(tmp_path) in mailfathom_database_url


def test_assert_enqueued_says_what_was_enqueued(mailfathom):
    mailfathom.mf.enqueue("a.kind", {"n": 1})
    mailfathom.mf.enqueue("a.kind", {"n": 1, "m": 2})
    expected = r"no job a.kind whose payload contains .*'n': 3.*#2 a.kind"
    with pytest.raises(AssertionError, match=expected):
        mailfathom.assert_enqueued("a.kind", n=3)
    with pytest.raises(AssertionError, match="2 jobs a.kind"):
        mailfathom.assert_enqueued("a.kind", n=1)
    assert mailfathom.assert_enqueued("a.kind", n=1, m=2).id == 2


def test_assert_sent_counts(mailfathom):
    mailfathom.mf.outbox.record(welcome("ada@example.org"))
    with pytest.raises(AssertionError, match="did you drain"):
        mailfathom.mail.assert_sent(to="ada@example.org")
    mailfathom.drain()
    with pytest.raises(AssertionError, match="expected 1 message.*found 0"):
        mailfathom.mail.assert_sent(to="grace@example.org")


def test_drain_leaves_what_is_not_due(mailfathom):
    mailfathom.mf.enqueue("later", delay=3600)
    mailfathom.mf.enqueue("held", hold=True)
    assert mailfathom.drain() == 0
    assert mailfathom.counts()[JobState.PENDING] == 2


def test_drain_stops_a_job_that_enqueues_itself_forever(mailfathom):
    mf = mailfathom.mf

    @mf.job("again")
    def again(ctx):
        mf.enqueue("again")

    mf.enqueue("again")
    with pytest.raises(AssertionError, match="keeps enqueueing"):
        mailfathom.drain(timeout=0.5)
    assert mf.jobs.counts()[JobState.SUCCEEDED] >= 1
"""


def test_the_plugins_fixtures_work_as_documented(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["mailfathom.testing"]\n')
    pytester.makepyfile(test_users=USERS_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=6)


def test_the_plugin_does_nothing_to_a_suite_that_does_not_ask(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="def test_plain(request, tmp_path):\n"
        "    assert request.config.pluginmanager.has_plugin('mailfathom.testing')\n"
    )
    result = pytester.runpytest("-p", "mailfathom.testing", "--setup-show")
    result.assert_outcomes(passed=1)
    setups = [line for line in result.outlines if "SETUP" in line]
    assert setups and not [line for line in setups if "mailfathom" in line]
