"""The SES transport (``SesTransport``) against moto's SES server on loopback, on every
store, through the unchanged delivery stage machine, with a fault proxy in front of
moto for the answers moto never gives: TransmissionBegun is committed before the
request leaves; 200 is Sent with SES's message id, counted once at moto; an unverified
sender is Refused with SES's reason; throttling and 5xx are retried (after
``Retry-After``); refused credentials and a suspended or paused account pause
delivery without spending attempts; a request that went out unanswered (connection
dropped, read timeout) is an unknown outcome left TransmissionBegun, sent once; a
message to more recipients than SES takes a request (50) is sent to the first 50 and
the rest are split off into new parts, sent later, each recipient once."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage

import pytest

from mailfathom import (
    ConfigurationError,
    JobState,
    MailFathom,
    OutgoingEmailStage,
    SesTransport,
    StoreError,
    Transport,
)
from mailfathom.clock import FakeClock
from mailfathom.delivery.phases import PhasePoint
from ses_fixtures import ACCESS_KEY, REGION, SENDER, Fault, MotoSes, SesProxy

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT
REFUSED = OutgoingEmailStage.REFUSED


def message(*to: str, sender: str = SENDER) -> EmailMessage:
    """A small message from ``sender`` to ``to``."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Subject"] = "hello"
    msg.set_content("hello\n")
    return msg


def transport(endpoint: str, *, timeout: float = 5.0) -> SesTransport:
    return SesTransport(
        REGION,
        endpoint_url=endpoint,
        timeout=timeout,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )


@pytest.fixture
def ses_app(database_url: str, clock: FakeClock, ses_proxy: SesProxy) -> Iterator[MailFathom]:
    """A migrated app whose deliveries go to moto's SES through the fault proxy."""
    mf = MailFathom(database_url, clock=clock, transport=transport(ses_proxy.url, timeout=1.5))
    mf.migrate()
    yield mf
    mf.close()


def test_the_ses_transport_is_a_transport() -> None:
    ses = transport("https://email.us-east-1.amazonaws.com")
    try:
        assert isinstance(ses, Transport) and ses.name == "ses"
    finally:
        ses.close()


def test_transmission_begun_is_committed_before_the_request_and_ses_accepts_it_once(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    recorded = ses_app.outbox.record(message("ann@example.org", "bob@example.org"))
    stages: list[OutgoingEmailStage] = []

    def look() -> None:  # runs on the proxy while the request is in flight
        stages.append(ses_app.outbox.get(recorded.id).stage)

    ses_proxy.on_request = look
    assert ses_app.worker().run(burst=True) == 1
    assert stages == [BEGUN]
    (taken,) = moto_ses.accepted()
    assert taken["raw_data"].encode() == ses_app.outbox.message_bytes(recorded.id)
    assert taken["source"] == SENDER
    assert {"ann@example.org", "bob@example.org"} <= set(taken["destinations"])
    email = ses_app.outbox.get(recorded.id)
    assert email.stage is SENT and email.reply_code == 200
    assert email.reply_text == "accepted by ses, message id " + _message_id(moto_ses)
    assert all(r.accepted for r in email.recipients)


def _message_id(moto_ses: MotoSes) -> str:
    """The MessageId moto answered (the id of the raw message it keeps)."""
    (taken,) = moto_ses.accepted()
    return str(taken["id"])


def test_an_unverified_sender_is_refused_with_ses_reason(
    ses_app: MailFathom, moto_ses: MotoSes
) -> None:
    recorded = ses_app.outbox.record(message("ann@example.org", sender="nobody@example.net"))
    ses_app.worker().run(burst=True)
    email = ses_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert email.reply_code == 400
    assert "MessageRejected" in (email.reason or "")
    assert "Did not have authority to send from email nobody@example.net" in (email.reason or "")
    assert moto_ses.accepted() == []


@pytest.mark.parametrize(
    ("fault", "wait"),
    [
        (Fault(429, "TooManyRequestsException", "slow down", {"Retry-After": "120"}), 120),
        (Fault(400, "Throttling", "Maximum sending rate exceeded."), None),
        (Fault(503, "ServiceUnavailable", "try again"), None),
        (Fault(500, "InternalFailure", "oops"), None),
    ],
    ids=["too-many-requests", "throttling", "unavailable", "internal"],
)
def test_throttling_and_5xx_are_retried_and_then_sent_once(
    *,
    ses_app: MailFathom,
    ses_proxy: SesProxy,
    moto_ses: MotoSes,
    clock: FakeClock,
    fault: Fault,
    wait: int | None,
) -> None:
    ses_proxy.script = [fault]
    recorded = ses_app.outbox.record(message("ann@example.org"))
    assert ses_app.worker().run(burst=True) == 1
    email = ses_app.outbox.get(recorded.id)
    assert email.stage is RECORDED
    assert email.reply_code == fault.status
    assert fault.code in (email.reason or "") and fault.message in (email.reason or "")
    job = ses_app.jobs.get(recorded.job_id or 0)
    assert job.state is JobState.PENDING and job.available_at is not None
    if wait is not None:  # SES's Retry-After, not the backoff
        assert job.available_at - clock.now() == timedelta(seconds=wait)
    assert moto_ses.accepted() == []
    clock.advance(timedelta(seconds=job.available_at.timestamp() - clock.now().timestamp()))
    assert ses_app.worker().run(burst=True) == 1
    assert ses_app.outbox.get(recorded.id).stage is SENT
    assert ses_proxy.sends == 2
    assert moto_ses.delivered() == [ses_app.outbox.get(recorded.id).message_id]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(403, "AccessDeniedException", "not authorized to perform ses:SendEmail"),
        Fault(403, "UnrecognizedClientException", "The security token included is invalid."),
        Fault(400, "AccountSuspendedException", "the account is suspended"),
        Fault(400, "SendingPausedException", "sending is paused for this account"),
    ],
    ids=["access-denied", "bad-credentials", "suspended", "paused"],
)
def test_refused_credentials_or_a_stopped_account_pause_delivery_at_no_attempt(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes, clock: FakeClock, fault: Fault
) -> None:
    ses_proxy.script = [fault]
    recorded = ses_app.outbox.record(message("ann@example.org"))
    ses_app.worker().run(burst=True)
    email = ses_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts) == (RECORDED, 0)
    assert (email.reason or "").startswith(
        f"waiting, no attempt spent: ses configuration error: ses answered HTTP {fault.status} "
        f"{fault.code}: {fault.message}"
    )
    problem = ses_app.deliverer.problem() or ""
    assert fault.code in problem and "fix the AWS credentials" in problem
    assert moto_ses.accepted() == []
    clock.advance(timedelta(minutes=10))  # past the configuration probe's wait
    ses_app.worker().run(burst=True)
    assert ses_app.outbox.get(recorded.id).stage is SENT
    assert ses_app.deliverer.problem() is None
    assert moto_ses.delivered() == [email.message_id]


@pytest.mark.parametrize("fault", [Fault(drop=True), Fault(hang=True)], ids=["dropped", "timeout"])
def test_a_request_that_went_out_unanswered_is_an_unknown_outcome_never_resent(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes, fault: Fault
) -> None:
    ses_proxy.script = [fault]
    recorded = ses_app.outbox.record(message("ann@example.org"))
    ses_app.worker().run(burst=True)
    email = ses_app.outbox.get(recorded.id)
    assert email.stage is BEGUN  # for an operator
    assert "went out and no answer came" in (email.reason or "")
    assert ses_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED
    assert ses_proxy.sends == 1  # botocore did not send it again
    assert moto_ses.delivered() == [email.message_id]  # SES did take it: once
    assert [e.id for e in ses_app.outbox.unknown()] == [recorded.id]


def test_ses_that_cannot_be_reached_sends_nothing_and_retries(
    database_url: str, clock: FakeClock, moto_ses: MotoSes
) -> None:
    gone = SesProxy(moto_ses.url)
    gone.stop()  # its port is closed now: the connection is refused
    mf = MailFathom(database_url, clock=clock, transport=transport(gone.url))
    try:
        mf.migrate()
        recorded = mf.outbox.record(message("ann@example.org"))
        mf.worker().run(burst=True)
        email = mf.outbox.get(recorded.id)
        assert email.stage is RECORDED
        assert "could not connect to ses" in (email.reason or "")
        assert "nothing was sent" in (email.reason or "")
        assert mf.jobs.get(recorded.job_id or 0).state is JobState.PENDING
        assert moto_ses.accepted() == []
    finally:
        mf.close()


def test_no_request_leaves_after_the_expiry(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes, clock: FakeClock
) -> None:
    recorded = ses_app.outbox.record(
        message("ann@example.org"), expires_at=clock.now() + timedelta(seconds=30)
    )

    def late(point: PhasePoint) -> None:
        if point == "after_354":  # signed in time; TransmissionBegun would be too late
            clock.advance(31)

    ses_app.deliverer.on_phase = late
    ses_app.worker().run(burst=True)
    seen = ses_app.outbox.get(recorded.id)
    assert (seen.stage, seen.reason, seen.body_transmissions) == (REFUSED, "expired", 0)
    assert ses_proxy.sends == 0 and moto_ses.accepted() == []


def test_a_failed_transmission_begun_save_sends_no_request(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    def save_fails(point: PhasePoint) -> None:
        if point == "after_354":
            raise StoreError("SQLite failed: disk I/O error (injected)")

    ses_app.deliverer.on_phase = save_fails
    recorded = ses_app.outbox.record(message("ann@example.org"))
    ses_app.worker().run(burst=True)
    email = ses_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts, email.body_transmissions) == (RECORDED, 1, 0)
    assert "TransmissionBegun could not be saved, so the body was not sent" in (email.reason or "")
    assert ses_proxy.sends == 0 and moto_ses.accepted() == []


def test_a_suppressed_recipient_is_left_out_of_the_request(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    ses_app.suppressions.add("bob@example.org", actor="ops", reason="complaint")
    recorded = ses_app.outbox.record(message("ann@example.org", "bob@example.org"))
    ses_app.worker().run(burst=True)
    (request,) = ses_proxy.requests
    assert request["Destination"] == {"ToAddresses": ["ann@example.org"]}
    assert len(moto_ses.accepted()) == 1
    ann, bob = ses_app.outbox.get(recorded.id).recipients
    assert ann.accepted and bob.refused


@pytest.mark.parametrize("settings", [{"timeout": 0.0}, {"connections": 0}])
def test_unusable_settings_are_refused_clearly(settings: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="must be above 0"):
        SesTransport(REGION, **settings)  # type: ignore[arg-type]


def test_max_recipients_below_one_is_refused_clearly() -> None:
    with pytest.raises(ConfigurationError, match="max_recipients must be at least 1"):
        SesTransport(REGION, max_recipients=0)


def undisclosed(count: int) -> tuple[EmailMessage, list[str]]:
    """A message whose ``count`` recipients are in the envelope only (moto would count
    addresses in To as recipients too, which SES does not when given the envelope)."""
    msg = message()
    msg.replace_header("To", "undisclosed-recipients:;")
    return msg, [f"user{n:03d}@example.org" for n in range(count)]


def test_a_message_to_120_recipients_goes_out_in_three_requests_each_recipient_once(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes, clock: FakeClock
) -> None:
    msg, to = undisclosed(120)
    recorded = ses_app.outbox.record(msg, recipients=to)
    assert ses_app.worker().run(burst=True) == 1
    first, rest = ses_app.outbox.parts(recorded.id)
    assert first.stage is SENT
    assert [r.address for r in first.recipients if r.accepted] == to[:50]
    assert (rest.stage, rest.parent_id) == (RECORDED, recorded.id)
    assert [r.address for r in rest.recipients] == to[50:]
    for _ in range(2):  # each new part is due after the delivery backoff
        clock.advance(timedelta(hours=1))
        assert ses_app.worker().run(burst=True) == 1
    parts = ses_app.outbox.parts(recorded.id)
    assert [p.stage for p in parts] == [SENT, SENT, SENT]
    assert [sum(r.accepted for r in p.recipients) for p in parts] == [50, 50, 20]
    assert {p.message_id for p in parts} == {recorded.message_id}
    sent = [request["Destination"]["ToAddresses"] for request in ses_proxy.requests]
    assert [len(addresses) for addresses in sent] == [50, 50, 20]
    assert Counter(a for addresses in sent for a in addresses) == Counter(to)
    accepted = moto_ses.accepted()
    assert len(accepted) == 3
    assert Counter(a for taken in accepted for a in taken["destinations"]) == Counter(to)
    frozen = ses_app.outbox.message_bytes(recorded.id).decode()
    assert [taken["raw_data"] for taken in accepted] == [frozen] * 3
    assert moto_ses.delivered() == [recorded.message_id] * 3
    everyone = ses_app.outbox.get(recorded.id).recipients
    assert sorted(r.address for r in everyone) == to and all(r.accepted for r in everyone)


def test_a_message_to_50_recipients_is_one_request(
    ses_app: MailFathom, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    msg, to = undisclosed(50)
    recorded = ses_app.outbox.record(msg, recipients=to)
    assert ses_app.worker().run(burst=True) == 1
    (only,) = ses_app.outbox.parts(recorded.id)
    assert only.stage is SENT and all(r.accepted for r in only.recipients)
    (request,) = ses_proxy.requests
    assert request["Destination"]["ToAddresses"] == to
    (taken,) = moto_ses.accepted()
    assert sorted(taken["destinations"]) == to


def test_without_boto3_the_transport_says_which_extra_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['boto3'] = None  # as if it were not installed\n"
        "from mailfathom import ConfigurationError, SesTransport\n"
        "try:\n"
        "    SesTransport('us-east-1')\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == (
        "SesTransport needs boto3: install it with pip install 'mailfathom[ses]'"
    )


def test_the_configuration_set_names_every_request(
    database_url: str, clock: FakeClock, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    ses = SesTransport(
        REGION,
        endpoint_url=ses_proxy.url,
        configuration_set="outbox-events",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )
    with MailFathom(database_url, clock=clock, transport=ses) as mf:
        mf.migrate()
        recorded = mf.outbox.record(message("ann@example.org"))
        mf.worker().run(burst=True)
        assert mf.outbox.get(recorded.id).stage is SENT
    (request,) = ses_proxy.requests
    assert request["ConfigurationSetName"] == "outbox-events"
    assert request["FromEmailAddress"] == SENDER
    assert len(moto_ses.accepted()) == 1
