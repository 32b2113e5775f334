"""The SIGKILL storm over HTTP: delivery worker processes killed at random moments
while they send through ``HttpJsonTransport`` to a slow fake provider that ignores
``Idempotency-Key`` (so only the crash discipline stands between a crash and a
duplicate), on every store. Counted at the provider: no message accepted twice; no
record Sent that the provider did not accept; every record left over is
TransmissionBegun (an unknown outcome for an operator), none Recorded or lost.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from email.message import EmailMessage
from pathlib import Path

import pytest

from fake_provider import FakeProvider
from mailfathom import HttpJsonTransport, MailFathom, OutgoingEmailStage

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("delivery_worker.py")
MESSAGES = 160  # several seconds of answers: the storm outlasts a quick machine
KILLS = 8


def message(index: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = f"customer{index}@example.org"
    msg["Subject"] = f"Order {index}"
    msg.set_content("It is on its way.\n")
    return msg


def _owed(app: MailFathom) -> int:
    return app.outbox.counts().get(OutgoingEmailStage.RECORDED, 0)


@pytest.mark.timeout(300)
def test_a_sigkill_storm_over_http_sends_nothing_twice_and_claims_nothing_false(
    database_url: str, provider: FakeProvider
) -> None:
    provider.dedup = False  # a provider without idempotency: the discipline alone
    provider.delay = 0.05  # answers take a while: kills land mid-request
    rng = random.Random(29)
    transport = HttpJsonTransport(provider.url, timeout=5.0)
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = [app.outbox.record(message(i)) for i in range(MESSAGES)]
        kills = 0
        deadline = time.monotonic() + 200
        while kills < KILLS and _owed(app) and time.monotonic() < deadline:
            worker = subprocess.Popen([sys.executable, str(WORKER), database_url, provider.url])
            try:
                worker.wait(timeout=rng.uniform(0.8, 2.5))  # it finished what was due
                time.sleep(0.3)  # the killed one's leases lapse (lease=1.0)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
                kills += 1
        while _owed(app) and time.monotonic() < deadline:  # healthy workers finish
            app.worker(concurrency=2, lease=1.0).run(burst=True)
            time.sleep(0.2)
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
