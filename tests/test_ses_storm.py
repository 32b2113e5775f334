"""The SIGKILL storm over Amazon SES: delivery worker processes killed at random
moments while they send through ``SesTransport`` to moto's SES server (behind a proxy
that slows its answers, so kills land mid-request), on every store. SES has no
idempotency key: only the crash discipline stands between a crash and a duplicate.
Counted at moto by Message-ID: no message accepted twice; no record Sent that moto did
not accept; every record left over is TransmissionBegun (an unknown outcome for an
operator), none Recorded or lost.
"""

from __future__ import annotations

from collections import Counter

import pytest

from mailfathom import MailFathom, OutgoingEmailStage, SesTransport
from ses_fixtures import ACCESS_KEY, REGION, MotoSes, SesProxy
from storm import MESSAGES, message, sigkill_storm

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_a_sigkill_storm_over_ses_sends_nothing_twice_and_claims_nothing_false(
    database_url: str, ses_proxy: SesProxy, moto_ses: MotoSes
) -> None:
    ses_proxy.delay = 0.05  # answers take a while: kills land mid-request
    transport = SesTransport(
        REGION,
        endpoint_url=ses_proxy.url,
        timeout=5.0,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = [app.outbox.record(message(i)) for i in range(MESSAGES)]
        target = f"ses:{ses_proxy.url}"
        kills = sigkill_storm(app, database_url, target, seed=31, requests=lambda: ses_proxy.sends)
        emails = [app.outbox.get(r.id) for r in recorded]

    delivered = moto_ses.delivered()
    stages = Counter(e.stage.value for e in emails)
    twice = {mid: n for mid, n in Counter(delivered).items() if n > 1}
    sent = {e.message_id for e in emails if e.stage is OutgoingEmailStage.SENT}
    false_sent = sent - set(delivered)
    summary = f"{kills} kills, stages {dict(stages)}, {ses_proxy.sends} requests"
    print(summary)  # the figures of this run (pytest -s shows them)
    assert kills >= 3, f"the storm never happened: {summary}"
    assert twice == {}, f"accepted twice at SES: {twice} ({summary})"
    assert false_sent == set(), f"Sent but never accepted: {false_sent} ({summary})"
    assert set(stages) <= {"Sent", "TransmissionBegun"}, summary
    assert stages["Sent"] >= MESSAGES - kills, summary
