"""SMTP configuration errors pause delivery without spending any message's attempts.

A real SMTP server process (tests/smtp_fault_server.py, aiosmtpd) answers 535 to a
wrong password, offers no STARTTLS to credentials, or answers 530 "authentication
required" to a client without them; delivery runs as the ``mailfathom.deliver`` job
through a real worker, on every store. The error is logged once (no traceback),
fails ``health`` with what to fix, shows on the console and in a metric, and ends on
its own once the server accepts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest
from click.testing import CliRunner

from mailfathom import FakeClock, MailFathom, OutgoingEmailStage
from mailfathom.cli import cli
from mailfathom.delivery.smtp_config import PROBE_WAIT
from mailfathom.observability.health import check_store
from mailfathom.observability.smtp_gauge import SmtpConfigurationGauge
from outbox_kit import assert_paused, invoice
from smtp_fixtures import FaultServer

RECORDED = OutgoingEmailStage.RECORDED
SENT = OutgoingEmailStage.SENT
RETRY = 60.0  # smtp_config_retry in these tests


def message(n: int) -> EmailMessage:
    return invoice(n, sender="alice@example.com")


@pytest.fixture
def apps() -> Iterator[list[MailFathom]]:
    """Apps made by the test, closed after it."""
    made: list[MailFathom] = []
    yield made
    for app in made:
        app.close()


def _app(apps: list[MailFathom], db: str, clock: FakeClock, url: str) -> MailFathom:
    app = MailFathom(db, clock=clock, smtp_url=url, smtp_config_retry=RETRY)
    app.migrate()
    apps.append(app)
    return app


def _run(app: MailFathom) -> None:
    app.worker(concurrency=2).run(burst=True)


def _config_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "SMTP configuration error" in r.getMessage()]


def _assert_paused(app: MailFathom, count: int, reply: str) -> None:
    """Every message Recorded with no attempt spent and never begun, saying why; every
    job Pending."""
    emails = assert_paused(app, count, "SMTP configuration error", reply)
    assert [email.transmission_begun_at for email in emails] == [None] * count


def _health(
    app: MailFathom, url: str, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str]:
    monkeypatch.setenv("MAILFATHOM_SMTP_URL", url)
    result = CliRunner().invoke(cli, ["--database", app.settings.database_url, "health", *args])
    return result.exit_code, result.output


def test_a_wrong_password_pauses_delivery_until_the_server_accepts(  # noqa: PLR0917 - fixtures
    database_url: str,
    clock: FakeClock,
    smtp: FaultServer,
    apps: list[MailFathom],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    smtp.script(tls=True, auth={"user": "app", "password": "right"})
    url = smtp.url(user="app", password="wrong")
    app = _app(apps, database_url, clock, url)
    for n in range(3):
        app.outbox.record(message(n))
    _run(app)
    _assert_paused(app, 3, "535")
    assert smtp.received() == []
    (logged,) = _config_logs(caplog)  # one line for the error, not one per message
    assert logged.levelno == logging.ERROR and logged.exc_info is None
    assert "535" in logged.getMessage() and "fix the user name and password" in (
        logged.getMessage()
    )
    assert not [r for r in caplog.records if r.exc_info is not None], "a traceback was logged"

    # health fails with what to fix, from the worker's state and from the CLI's own probe
    problem = app.deliverer.problem()
    assert problem is not None and "535" in problem
    report = check_store(app.store, app.clock, smtp=app.deliverer.problem)
    assert not report.ok
    assert [c.name for c in report.checks if not c.ok] == ["smtp"]
    code, output = _health(app, url, monkeypatch)
    assert code == 1, output
    assert "FAIL smtp: SMTP configuration error" in output and "535" in output

    # the metric and the console banner
    gauge = {
        m.name: m.samples[0].value for m in SmtpConfigurationGauge(app.deliverer.gate).collect()
    }
    assert gauge["mailfathom_smtp_configuration_error"] == 1
    assert gauge["mailfathom_smtp_configuration_error_since_seconds"] == clock.now().timestamp()
    page = _overview(app)
    assert "Delivery is paused: SMTP configuration error" in page and "535" in page

    # a slow pace: before it, nothing is tried; after it, still nothing is spent
    caplog.clear()
    clock.advance(RETRY + 1)
    _run(app)
    _assert_paused(app, 3, "535")
    assert _config_logs(caplog) == [], "the same error was logged again"

    # the server starts accepting that password: delivery resumes on its own, the
    # messages that waited while the first one tried going a few seconds later
    smtp.script(tls=True, auth={"user": "app", "password": "wrong"})
    clock.advance(RETRY + 1)
    _run(app)
    clock.advance(PROBE_WAIT)
    _run(app)
    assert [(e.stage, e.attempts) for e in app.outbox.list()] == [(SENT, 1)] * 3
    assert len(smtp.accepted()) == 3
    assert app.deliverer.problem() is None
    assert [r.getMessage().split(":")[0] for r in _config_logs(caplog)] == [
        "SMTP configuration error resolved"
    ]
    code, output = _health(app, url, monkeypatch)
    assert code == 0, output
    assert "ok smtp: " in output
    assert "Delivery is paused" not in _overview(app)


def test_credentials_offered_to_a_server_without_starttls_wait_for_the_fix(
    database_url: str,
    clock: FakeClock,
    smtp: FaultServer,
    apps: list[MailFathom],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    smtp.script(auth={"user": "app", "password": "pw"})  # AUTH, no STARTTLS
    url = smtp.url(user="app", password="pw")
    app = _app(apps, database_url, clock, url)
    app.outbox.record(message(1))
    _run(app)
    _assert_paused(app, 1, "refusing to send credentials over an unencrypted connection")
    code, output = _health(app, url, monkeypatch)
    assert code == 1 and "FAIL smtp:" in output and "STARTTLS" in output
    code, output = _health(app, url, monkeypatch, "--no-smtp")
    assert code == 0 and "smtp" not in output, output
    smtp.script(tls=True, auth={"user": "app", "password": "pw"})  # the server is fixed
    clock.advance(RETRY + 1)
    _run(app)
    assert [(e.stage, e.attempts) for e in app.outbox.list()] == [(SENT, 1)]
    assert [(r.login, r.tls) for r in smtp.accepted()] == [("app", True)]


def test_authentication_required_never_refuses_a_message(
    database_url: str, clock: FakeClock, smtp: FaultServer, apps: list[MailFathom]
) -> None:
    smtp.script(tls=True, auth={"user": "app", "password": "pw"})  # 530 to MAIL FROM
    app = _app(apps, database_url, clock, smtp.url())  # no credentials
    for n in range(2):
        app.outbox.record(message(n))
    _run(app)
    _assert_paused(app, 2, "530")
    problem = app.deliverer.problem() or ""
    assert "put the user name and password the server expects in smtp_url" in problem
    smtp.script(tls=True)  # the server no longer requires authentication
    clock.advance(RETRY + 1)
    _run(app)
    clock.advance(PROBE_WAIT)
    _run(app)
    assert [(e.stage, e.attempts) for e in app.outbox.list()] == [(SENT, 1)] * 2


def test_an_outage_still_spends_attempts(
    database_url: str, clock: FakeClock, smtp: FaultServer, apps: list[MailFathom]
) -> None:
    smtp.script(ehlo="421 4.3.2 shutting down")
    app = _app(apps, database_url, clock, smtp.url())
    app.outbox.record(message(1))
    _run(app)
    (email,) = app.outbox.list()
    assert (email.stage, email.attempts) == (RECORDED, 1)
    assert app.deliverer.problem() is None


def _overview(app: MailFathom) -> Any:
    from consolekit import make_client

    with make_client(app) as client:
        response = client.get("/")
        assert response.status_code == 200
        return response.text
