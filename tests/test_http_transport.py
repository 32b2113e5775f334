"""The HTTP transport (``HttpJsonTransport``) against a fake provider on loopback, on
every store, through the unchanged delivery stage machine: TransmissionBegun is
committed before the request leaves; 2xx is Sent with the provider's id; 429 and 5xx
are retried after ``Retry-After``; a 4xx refusal is Refused with the provider's
reason; a request that went out unanswered (connection dropped, timeout) is an
unknown outcome left TransmissionBegun, and its "send again" repeats the record's
``Idempotency-Key`` so the provider accepts the message once."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta

import pytest

from fake_provider import Answer, FakeProvider, Seen
from mailfathom import (
    ConfigurationError,
    HttpJsonTransport,
    JobState,
    MailFathom,
    OutgoingEmailStage,
    Transport,
)
from mailfathom.clock import FakeClock
from outbox_kit import message


@pytest.fixture
def http_app(database_url: str, clock: FakeClock, provider: FakeProvider) -> Iterator[MailFathom]:
    """A migrated app whose deliveries go to the fake provider."""
    transport = HttpJsonTransport(provider.url, api_key="k-123", timeout=2.0)
    mf = MailFathom(database_url, clock=clock, transport=transport)
    mf.migrate()
    yield mf
    mf.close()


def test_the_http_transport_is_a_transport() -> None:
    assert isinstance(HttpJsonTransport("https://api.example.com/send"), Transport)


def test_transmission_begun_is_committed_before_the_request_and_2xx_is_sent(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    recorded = http_app.outbox.record(message("ann@example.com", "bob@example.com"))
    stages: list[OutgoingEmailStage] = []

    def look(seen: Seen) -> None:  # runs on the server while the request is in flight
        stages.append(http_app.outbox.get(recorded.id).stage)

    provider.on_request = look
    assert http_app.worker().run(burst=True) == 1
    assert stages == [OutgoingEmailStage.TRANSMISSION_BEGUN]
    (seen,) = provider.requests
    assert seen.headers["Authorization"] == "Bearer k-123"
    assert seen.headers["Idempotency-Key"].startswith(f"mailfathom-{recorded.id}-")
    assert seen.body["from"] == "app@example.net"
    assert seen.body["to"] == ["ann@example.com", "bob@example.com"]
    raw = base64.b64decode(seen.body["raw"])
    assert raw == http_app.outbox.message_bytes(recorded.id)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert email.reply_code == 200 and "message id prov-1" in (email.reply_text or "")
    assert all(r.accepted for r in email.recipients)


@pytest.mark.parametrize(
    ("answer", "wait"),
    [
        (Answer(429, {"message": "slow down"}, {"Retry-After": "120"}), 120),
        (Answer(503, {"message": "maintenance"}), None),
    ],
    ids=["throttled", "unavailable"],
)
def test_429_and_5xx_are_retried_after_retry_after_and_then_sent(
    http_app: MailFathom,
    provider: FakeProvider,
    clock: FakeClock,
    answer: Answer,
    wait: int | None,
) -> None:
    provider.script = [answer]
    recorded = http_app.outbox.record(message("ann@example.com"))
    assert http_app.worker().run(burst=True) == 1
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.RECORDED
    assert email.reply_code == answer.status
    assert answer.body["message"] in (email.reason or "")
    job = http_app.jobs.get(recorded.job_id or 0)
    assert job.state is JobState.PENDING and job.available_at is not None
    if wait is not None:  # the provider's Retry-After, not the backoff
        assert job.available_at - clock.now() == timedelta(seconds=wait)
    clock.advance(timedelta(seconds=job.available_at.timestamp() - clock.now().timestamp()))
    assert http_app.worker().run(burst=True) == 1
    assert http_app.outbox.get(recorded.id).stage is OutgoingEmailStage.SENT
    assert len(provider.accepted) == 1 and len(provider.requests) == 2


def test_a_4xx_refusal_is_refused_with_the_providers_reason(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    provider.script = [Answer(422, {"message": "the From domain is not verified"})]
    recorded = http_app.outbox.record(message("ann@example.com"))
    http_app.worker().run(burst=True)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert email.reply_code == 422
    assert "the From domain is not verified" in (email.reason or "")


@pytest.mark.parametrize(
    "answer", [Answer(drop=True), Answer(hang=True)], ids=["connection-dropped", "timeout"]
)
def test_a_request_that_went_out_unanswered_is_an_unknown_outcome_and_sending_again_is_once(
    http_app: MailFathom, provider: FakeProvider, answer: Answer
) -> None:
    provider.script = [answer]
    recorded = http_app.outbox.record(message("ann@example.com"))
    http_app.worker().run(burst=True)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.TRANSMISSION_BEGUN  # for an operator
    assert http_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED
    assert len(provider.requests) == 1
    # the provider did take it this time; "send again" repeats the record's key
    provider.script = [Answer()]
    provider.accepted[provider.requests[0].headers["Idempotency-Key"]] = {"id": "prov-0"}
    http_app.outbox.resolve(recorded.id, "send_again", actor="ops")
    http_app.worker().run(burst=True)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert "prov-0" in (email.reply_text or "")
    keys = [seen.headers["Idempotency-Key"] for seen in provider.requests]
    assert len(keys) == 2 and len(set(keys)) == 1 and len(provider.accepted) == 1


def test_a_provider_that_cannot_be_reached_sends_nothing_and_retries(
    database_url: str, clock: FakeClock
) -> None:
    gone = FakeProvider()
    gone.stop()  # its port is closed now: the connection is refused
    mf = MailFathom(database_url, clock=clock, transport=HttpJsonTransport(gone.url))
    try:
        mf.migrate()
        recorded = mf.outbox.record(message("ann@example.com"))
        mf.worker().run(burst=True)
        email = mf.outbox.get(recorded.id)
        assert email.stage is OutgoingEmailStage.RECORDED
        assert email.transmission_begun_at is None and email.body_transmissions == 0
        assert "nothing was sent" in (email.reason or "")
    finally:
        mf.close()


def test_a_suppressed_recipient_is_left_out_of_the_request(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    http_app.suppressions.add("bob@example.com", actor="ops", reason="complaint")
    recorded = http_app.outbox.record(message("ann@example.com", "bob@example.com"))
    http_app.worker().run(burst=True)
    assert [seen.body["to"] for seen in provider.requests] == [["ann@example.com"]]
    ann, bob = http_app.outbox.get(recorded.id).recipients
    assert ann.accepted and bob.refused


@pytest.mark.parametrize("url", ["ftp://x/send", "api.example.com/send", "https:///send"])
def test_an_unusable_provider_url_is_refused_clearly(url: str) -> None:
    with pytest.raises(ConfigurationError, match="not usable: give https://host/path"):
        HttpJsonTransport(url)
