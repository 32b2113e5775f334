"""A provider that refuses the transport's API key (401) or the account (403) pauses
delivery as SMTP's refused password does, without spending any message's attempts.

The HTTP transport talks to a fake provider on loopback (tests/fake_provider.py) that
requires an API key; delivery runs as the ``mailfathom.deliver`` job through a real
worker, on every store. The error is logged once, fails ``health``, shows on the
console and in the metric, the provider is tried once per ``smtp_config_retry``, and
delivery resumes on its own once the provider takes the key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from consolekit import make_client
from fake_provider import Answer, FakeProvider
from mailfathom import FakeClock, HttpJsonTransport, MailFathom, OutgoingEmailStage
from mailfathom.console.service import Console
from mailfathom.delivery.smtp_config import PROBE_WAIT
from mailfathom.observability.health import check_store
from mailfathom.observability.smtp_gauge import SmtpConfigurationGauge
from outbox_kit import assert_paused, invoice

SENT = OutgoingEmailStage.SENT
RETRY = 60.0  # smtp_config_retry in these tests


@pytest.fixture
def http_app(database_url: str, clock: FakeClock, provider: FakeProvider) -> Iterator[MailFathom]:
    """A migrated app whose deliveries go to the fake provider with the key ``k-old``."""
    transport = HttpJsonTransport(provider.url, api_key="k-old", timeout=2.0, name="acme")
    mf = MailFathom(database_url, clock=clock, transport=transport, smtp_config_retry=RETRY)
    mf.migrate()
    yield mf
    mf.close()


def _run(app: MailFathom) -> None:
    app.worker(concurrency=2).run(burst=True)


def _config_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "acme configuration error" in r.getMessage()]


def _assert_paused(app: MailFathom, count: int, status: str) -> None:
    """Every message Recorded with no attempt spent, saying why; every job Pending."""
    assert_paused(app, count, "acme configuration error", status)


def test_a_refused_api_key_pauses_delivery_until_the_provider_accepts(
    http_app: MailFathom,
    provider: FakeProvider,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    provider.require_key = "k-new"
    for n in range(3):
        http_app.outbox.record(invoice(n))
    _run(http_app)
    _assert_paused(http_app, 3, "HTTP 401")
    tried = len(provider.requests)  # the deliveries already in flight (concurrency 2)
    assert tried in {1, 2}, "the deliveries after the refusal tried the provider"
    assert provider.delivered == []
    (logged,) = _config_logs(caplog)  # one line for the error, not one per message
    assert logged.levelno == logging.ERROR and logged.exc_info is None
    assert "invalid API key" in logged.getMessage()
    assert "fix the API key" in logged.getMessage()

    # health fails with what to fix; the metric and the console say it too
    problem = http_app.deliverer.problem()
    assert problem is not None and "HTTP 401" in problem
    report = check_store(http_app.store, http_app.clock, smtp=http_app.deliverer.problem)
    assert [c.name for c in report.checks if not c.ok] == ["smtp"]
    gauge = {
        m.name: m.samples[0].value
        for m in SmtpConfigurationGauge(http_app.deliverer.gate).collect()
    }
    assert gauge["mailfathom_smtp_configuration_error"] == 1
    assert Console(http_app).overview().smtp_problem == problem
    page = make_client(http_app).get("/").text
    assert "Delivery is paused: acme configuration error" in page and "HTTP 401" in page

    # a slow pace: before it, nothing is tried; after it, one probe and nothing spent
    caplog.clear()
    _run(http_app)
    assert len(provider.requests) == tried
    clock.advance(RETRY + 1)
    _run(http_app)
    assert len(provider.requests) == tried + 1, "one probe per smtp_config_retry"
    _assert_paused(http_app, 3, "HTTP 401")
    assert _config_logs(caplog) == [], "the same error was logged again"

    # the provider takes the key again: delivery resumes on its own
    provider.require_key = "k-old"
    clock.advance(RETRY + 1)
    _run(http_app)
    clock.advance(PROBE_WAIT)
    _run(http_app)
    assert [(e.stage, e.attempts) for e in http_app.outbox.list()] == [(SENT, 1)] * 3
    assert len(provider.delivered) == 3
    assert http_app.deliverer.problem() is None
    assert [r.getMessage().split(":")[0] for r in _config_logs(caplog)] == [
        "acme configuration error resolved"
    ]
    assert Console(http_app).overview().smtp_problem is None


def test_a_suspended_account_pauses_delivery_too(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    provider.script = [Answer(403, {"message": "account suspended"})]
    recorded = http_app.outbox.record(invoice(1))
    _run(http_app)
    _assert_paused(http_app, 1, "HTTP 403")
    email = http_app.outbox.get(recorded.id)
    assert "account suspended" in (email.reason or "")
    assert email.reply_code == 403


def test_an_outage_of_the_provider_does_not_end_the_pause(
    http_app: MailFathom, provider: FakeProvider, clock: FakeClock
) -> None:
    provider.require_key = "k-new"
    http_app.outbox.record(invoice(1))
    _run(http_app)
    provider.require_key = None
    provider.script = [Answer(503, {"message": "down"})]
    clock.advance(RETRY + 1)
    _run(http_app)
    assert http_app.deliverer.problem() is not None, "a 503 proved nothing about the key"
