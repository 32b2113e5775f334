"""Amazon SES bounces and complaints through SNS, on every store: ``POST
/api/suppressions/sns`` on a token console (SNS sends no token) accepts a message only
when its topic is allowed and its signature (version 1 and 2) verifies against a signing
certificate fetched over verified HTTPS from an allowed host; a permanent bounce or a
complaint then suppresses the address (and a delivery through the worker to a real SMTP
server leaves it out), a transient bounce is counted once however often SNS delivers it,
and anything unverifiable is refused with nothing changed."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest

from consolekit import LOOPBACK_PEER, TOKEN
from mailfathom import MailFathom, OutgoingEmailStage
from mailfathom.console import Console
from mailfathom.delivery.sns import SnsFetcher, SnsVerifier
from mailfathom.web import Access
from mailfathom.web.app import create_app
from smtp_fixtures import FaultServer
from sns_fixtures import OTHER_TOPIC, TOPIC, SnsChain, bounce, complaint, signing_pair

SNS = "/api/suppressions/sns"


def console_client(mf: MailFathom, verifier: SnsVerifier | None = None) -> Any:
    """A test client of a token console on ``mf`` (as if bound to 127.0.0.1)."""
    from starlette.testclient import TestClient

    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", TOKEN), sns_verifier=verifier)
    return TestClient(app, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER)


@pytest.fixture
def client(mail_app: MailFathom, sns_chain: SnsChain) -> Iterator[Any]:
    """The console, trusting the loopback chain's host (``localhost:<port>``) and CA."""
    fetcher = SnsFetcher(
        hosts=re.compile(r"localhost:\d+"), ssl_context=sns_chain.client_context, timeout=5
    )
    with console_client(mail_app, SnsVerifier(frozenset({TOPIC}), fetcher=fetcher)) as c:
        yield c


def post(client: Any, message: dict[str, str]) -> Any:
    """Post ``message`` the way SNS does: JSON as text/plain, with its type header."""
    return client.post(
        SNS,
        content=json.dumps(message),
        headers={
            "content-type": "text/plain; charset=UTF-8",
            "x-amz-sns-message-type": message["Type"],
        },
    )


def letter(*to: str) -> EmailMessage:
    """A small message from us to ``to``."""
    msg = EmailMessage()
    msg["From"] = "app@example.net"
    msg["To"] = ", ".join(to)
    msg["Subject"] = "hello"
    msg.set_content("hello\n")
    return msg


def nothing_changed(mf: MailFathom) -> None:
    """The list and its audit are as empty as a fresh database's."""
    assert mf.suppressions.list() == []
    assert mf.suppressions.event_counts() == {}


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_signed_permanent_bounce_suppresses_and_delivery_leaves_the_address_out(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain, smtp: FaultServer, version: str
) -> None:
    message = sns_chain.sign(
        sns_chain.notification(bounce("Permanent", "Bob@Example.com")), version=version
    )
    answered = post(client, message)  # no bearer token: the signature is the authentication
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert (body["notification_type"], body["duplicate"], body["soft"]) == ("Bounce", False, [])
    assert [(e["address"], e["reason"], e["source"]) for e in body["suppressed"]] == [
        ("bob@example.com", "hard_bounce", "ses")
    ]
    entry = mail_app.suppressions.get("bob@example.com")
    assert entry is not None and entry.actor == "sns"
    assert "5.1.1 smtp; 550 5.1.1 <Bob@Example.com> mailbox problem" in (entry.detail or "")
    assert [(e.action, e.actor) for e in mail_app.suppressions.events("bob@example.com")] == [
        ("add", "sns")
    ]
    recorded = mail_app.outbox.record(letter("ann@example.com", "bob@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ann@example.com"]]
    email = mail_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    ann, bob = email.recipients
    assert ann.accepted and bob.refused and bob.reply_code == 550
    assert (bob.reply_text or "").startswith("suppressed: hard_bounce (ses)")


def test_the_signing_certificate_is_fetched_once_and_cached(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    before = sns_chain.hits["/cert.pem"]
    for address in ("c1@example.com", "c2@example.com"):
        unsigned = sns_chain.notification(complaint(address))
        if address.startswith("c2"):
            del unsigned["Subject"]  # SNS leaves it out when the publisher gave none
        answered = post(client, sns_chain.sign(unsigned, version="2"))
        assert answered.status_code == 200, answered.text
    assert sns_chain.hits["/cert.pem"] - before == 1  # this console's fetcher, once
    assert [(e.address, e.reason) for e in mail_app.suppressions.list()] == [
        ("c1@example.com", "complaint"),
        ("c2@example.com", "complaint"),
    ]


@pytest.mark.parametrize("name", ["Message", "MessageId", "Subject", "Timestamp"])
def test_a_tampered_field_is_refused_and_changes_nothing(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain, name: str
) -> None:
    message = sns_chain.sign(sns_chain.notification(bounce("Permanent", "eve@example.com")))
    if name == "Message":
        message[name] = json.dumps(bounce("Permanent", "victim@example.com"))
    else:
        message[name] += "x"
    answered = post(client, message)
    assert answered.status_code == 403, answered.text
    assert answered.json()["error"]["type"] == "SignatureRefused"
    assert "signature does not verify" in answered.json()["error"]["message"]
    nothing_changed(mail_app)


def test_a_message_signed_by_another_key_is_refused(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    forger, _ = signing_pair()
    message = sns_chain.sign(sns_chain.notification(complaint("x@example.com")), key=forger)
    answered = post(client, message)
    assert answered.status_code == 403 and "does not verify" in answered.text
    nothing_changed(mail_app)


@pytest.mark.parametrize(
    ("cert_url", "why"),
    [
        ("https://127.0.0.1:{port}/cert.pem", "wrong host"),
        ("http://localhost:{port}/cert.pem", "plain http"),
        ("https://user@localhost:{port}/cert.pem", "user part"),
        ("https://localhost.evil.example:{port}/cert.pem", "look-alike host"),
    ],
)
def test_a_certificate_url_off_the_allowed_hosts_is_refused_without_fetching(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain, cert_url: str, why: str
) -> None:
    hits = sum(sns_chain.hits.values())
    message = sns_chain.sign(
        sns_chain.notification(bounce("Permanent", "fay@example.com")),
        cert_url=cert_url.format(port=sns_chain.port),
    )
    answered = post(client, message)
    assert answered.status_code == 403, why
    assert "is not https on an SNS host" in answered.json()["error"]["message"]
    assert sum(sns_chain.hits.values()) == hits  # nothing was fetched from it
    nothing_changed(mail_app)


def test_an_unknown_topic_is_refused_naming_the_setting(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    message = sns_chain.sign(
        sns_chain.notification(bounce("Permanent", "gus@example.com"), topic=OTHER_TOPIC)
    )
    answered = post(client, message)
    assert answered.status_code == 403
    assert "add it to sns_topic_arns" in answered.json()["error"]["message"]
    nothing_changed(mail_app)


def test_a_subscription_is_confirmed_only_when_it_verifies(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    forged = sns_chain.sign(sns_chain.subscription("forged-token"))
    forged["Token"] = "other-token"
    assert post(client, forged).status_code == 403
    unknown = sns_chain.sign(sns_chain.subscription("stranger-token", topic=OTHER_TOPIC))
    assert post(client, unknown).status_code == 403
    assert sns_chain.confirmed == []
    answered = post(client, sns_chain.sign(sns_chain.subscription("good-token"), version="2"))
    assert answered.status_code == 200, answered.text
    assert answered.json() == {
        "type": "SubscriptionConfirmation",
        "topic_arn": TOPIC,
        "confirmed": True,
    }
    assert sns_chain.confirmed_event.is_set() and sns_chain.confirmed == ["good-token"]
    sns_chain.confirmed.clear()
    nothing_changed(mail_app)


def test_a_subscribe_url_off_the_allowed_hosts_is_never_fetched(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    message = sns_chain.subscription("t")
    message["SubscribeURL"] = sns_chain.url("/confirm?Token=t", host="127.0.0.1")
    answered = post(client, sns_chain.sign(message))
    assert answered.status_code == 403 and "SubscribeURL" in answered.text
    assert sns_chain.confirmed == []


def test_a_complaint_suppresses(mail_app: MailFathom, client: Any, sns_chain: SnsChain) -> None:
    answered = post(client, sns_chain.sign(sns_chain.notification(complaint("hal@example.com"))))
    assert answered.status_code == 200, answered.text
    entry = mail_app.suppressions.get("hal@example.com")
    assert entry is not None
    assert (entry.reason, entry.source, entry.detail) == ("complaint", "ses", "complaint: abuse")


@pytest.mark.parametrize("bounce_type", ["Transient", "Undetermined"])
def test_a_soft_bounce_is_counted_once_however_often_sns_delivers_it(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain, smtp: FaultServer, bounce_type: str
) -> None:
    message = sns_chain.sign(
        sns_chain.notification(bounce(bounce_type, "ida@example.com", sub_type="MailboxFull"))
    )
    first = post(client, message)
    assert first.status_code == 200, first.text
    assert (first.json()["soft"], first.json()["suppressed"]) == (["ida@example.com"], [])
    again = post(client, message)  # SNS retries a delivery it got no answer to
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert mail_app.suppressions.event_counts() == {"soft_bounce": 1}
    (event,) = mail_app.suppressions.soft_bounces()
    assert (event.address, event.source, event.actor) == ("ida@example.com", "ses", "sns")
    assert f"({bounce_type}/MailboxFull)" in (event.detail or "")
    assert not mail_app.suppressions.is_suppressed("ida@example.com")
    mail_app.outbox.record(letter("ida@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ida@example.com"]]


def test_a_delivery_notification_changes_nothing(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    delivery = {"notificationType": "Delivery", "delivery": {"recipients": ["jo@example.com"]}}
    answered = post(client, sns_chain.sign(sns_chain.notification(delivery)))
    assert answered.status_code == 200
    assert (answered.json()["notification_type"], answered.json()["suppressed"]) == (
        "Delivery",
        [],
    )
    nothing_changed(mail_app)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("not json", "not an SNS message"),
        (json.dumps({"Type": "Ping"}), "not an SNS message type"),
        (json.dumps({"Type": "Notification", "Message": "x"}), "lacks"),
    ],
)
def test_a_malformed_body_is_refused_with_what_to_do(
    mail_app: MailFathom, client: Any, body: str, match: str
) -> None:
    answered = client.post(SNS, content=body, headers={"content-type": "text/plain"})
    assert answered.status_code == 400 and match in answered.json()["error"]["message"]
    nothing_changed(mail_app)


def test_a_signed_message_that_is_no_ses_notification_changes_nothing(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    good = bounce("Permanent", "kim@example.com")
    good["bounce"]["bouncedRecipients"].append({"emailAddress": "not-an-address"})
    for ses in ({"hello": "world"}, good):
        answered = post(client, sns_chain.sign(sns_chain.notification(ses)))
        assert answered.status_code == 400, answered.text
    message = sns_chain.notification({})
    message["Message"] = "plain text"
    answered = post(client, sns_chain.sign(message))
    assert answered.status_code == 400 and "not an SES notification" in answered.text
    nothing_changed(mail_app)  # kim was not suppressed: every address is checked first


def test_a_certificate_that_cannot_be_fetched_asks_sns_to_retry(
    mail_app: MailFathom, client: Any, sns_chain: SnsChain
) -> None:
    message = sns_chain.sign(
        sns_chain.notification(complaint("lou@example.com")),
        cert_url=sns_chain.url("/missing.pem"),
    )
    answered = post(client, message)
    assert answered.status_code == 503 and "answered 404" in answered.text
    nothing_changed(mail_app)


def test_the_endpoint_is_off_until_topics_are_set(mail_app: MailFathom) -> None:
    with console_client(mail_app) as client:
        answered = client.post(SNS, content="{}", headers={"content-type": "text/plain"})
    assert answered.status_code == 403
    assert answered.json()["error"]["type"] == "NotConfigured"
    assert "set sns_topic_arns (MAILFATHOM_SNS_TOPIC_ARNS)" in answered.text


def test_the_default_verifier_trusts_only_amazon_hosts(
    database_url: str, sns_chain: SnsChain
) -> None:
    mf = MailFathom(database_url, sns_topic_arns=f" {TOPIC} , {OTHER_TOPIC}")
    mf.migrate()
    try:
        with console_client(mf) as client:
            for url in (
                sns_chain.url("/cert.pem"),
                "https://sns.eu-west-1.amazonaws.com.evil.example/cert.pem",
                "https://sns.eu-west-1.amazonaws.com:8443/cert.pem",
                "http://sns.eu-west-1.amazonaws.com/cert.pem",
            ):
                message = sns_chain.sign(
                    sns_chain.notification(complaint("max@example.com")), cert_url=url
                )
                answered = post(client, message)
                assert answered.status_code == 403, url
                assert "not https on an SNS host" in answered.text
        nothing_changed(mf)
    finally:
        mf.close()


def test_a_bad_topic_setting_is_refused_at_start(database_url: str) -> None:
    from mailfathom import ConfigurationError

    with pytest.raises(ConfigurationError, match="not an SNS topic ARN"):
        MailFathom(database_url, sns_topic_arns="ses-bounces")


def test_only_posts_to_the_sns_path_go_without_the_token(mail_app: MailFathom, client: Any) -> None:
    assert client.get(SNS).status_code == 401  # a read of it needs the token like any other
    listed = client.post(
        "/api/suppressions/events", content="{}", headers={"content-type": "text/plain"}
    )
    assert listed.status_code == 415
    assert client.post("/api/suppressions", json={"address": "a@example.com"}).status_code == 401
    nothing_changed(mail_app)


def test_a_console_mounted_with_auth_takes_sns_messages_its_auth_lets_through(
    database_url: str, sns_chain: SnsChain
) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    from mailfathom.web import ConsoleUser
    from mailfathom.web import create_app as mount_console

    def auth(request: Any) -> ConsoleUser | None:
        return ConsoleUser("sns") if request.url.path.endswith(SNS) else None

    mf = MailFathom(database_url, sns_topic_arns=TOPIC)
    mf.migrate()
    try:
        host = Starlette(routes=[Mount("/ops", app=mount_console(mf, auth=auth))])
        with TestClient(host, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER) as client:
            assert client.get("/ops/api/suppressions").status_code == 401
            message = sns_chain.sign(sns_chain.notification(complaint("ned@example.com")))
            answered = client.post(
                f"/ops{SNS}",
                content=json.dumps(message),
                headers={"content-type": "text/plain; charset=UTF-8"},
            )
        # past auth and the guard (no 415 for text/plain): the handler refused the host
        assert answered.status_code == 403, answered.text
        assert "not https on an SNS host" in answered.json()["error"]["message"]
        nothing_changed(mf)
    finally:
        mf.close()


def test_one_notification_delivered_twice_at_once_is_applied_once(mail_app: MailFathom) -> None:
    notification = json.dumps(bounce("Transient", "oz@example.com", "pam@example.com"))
    start = threading.Barrier(2)
    reports = []

    def deliver() -> None:
        start.wait(10)
        reports.append(mail_app.suppressions.ingest_ses(notification, receipt="sns:same-id"))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(r.duplicate for r in reports) == [False, True]
    assert mail_app.suppressions.event_counts() == {"soft_bounce": 2}  # one per recipient
