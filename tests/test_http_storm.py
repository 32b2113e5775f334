"""The SIGKILL storm over HTTP: delivery worker processes killed at random moments
while they send through ``HttpJsonTransport`` to a slow fake provider that ignores
``Idempotency-Key`` (so only the crash discipline stands between a crash and a
duplicate), on every store. Counted at the provider: no message accepted twice; no
record Sent that the provider did not accept; every record left over is
TransmissionBegun (an unknown outcome for an operator), none Recorded or lost.
"""

from __future__ import annotations

from collections import Counter

import pytest

from fake_provider import FakeProvider
from mailfathom import HttpJsonTransport, MailFathom, OutgoingEmailStage
from storm import MESSAGES, message, sigkill_storm

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_a_sigkill_storm_over_http_sends_nothing_twice_and_claims_nothing_false(
    database_url: str, provider: FakeProvider
) -> None:
    provider.dedup = False  # a provider without idempotency: the discipline alone
    provider.delay = 0.05  # answers take a while: kills land mid-request
    transport = HttpJsonTransport(provider.url, timeout=5.0)
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = [app.outbox.record(message(i)) for i in range(MESSAGES)]
        sending = lambda: len(provider.requests)  # noqa: E731
        kills = sigkill_storm(app, database_url, provider.url, seed=29, requests=sending)
        emails = [app.outbox.get(r.id) for r in recorded]

    stages = Counter(e.stage.value for e in emails)
    twice = {mid: n for mid, n in Counter(provider.delivered).items() if n > 1}
    sent = {e.message_id for e in emails if e.stage is OutgoingEmailStage.SENT}
    false_sent = sent - set(provider.delivered)
    summary = f"{kills} kills, stages {dict(stages)}, {len(provider.requests)} requests"
    print(summary)  # the figures of this run (pytest -s shows them)
    assert kills >= 3, f"the storm never happened: {summary}"
    assert twice == {}, f"accepted twice at the provider: {twice} ({summary})"
    assert false_sent == set(), f"Sent but never accepted: {false_sent} ({summary})"
    assert set(stages) <= {"Sent", "TransmissionBegun"}, summary
    assert stages["Sent"] >= MESSAGES - kills, summary
