"""What the transports' crash tests share: the SIGKILL storm (delivery worker
processes, ``delivery_worker.py``, started one after another and SIGKILLed at random
moments while they deliver, then healthy workers finishing what is left)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable
from email.message import EmailMessage

from mailfathom import MailFathom, OutgoingEmailStage
from outbox_kit import WORKER

__all__ = ["MESSAGES", "WORKER", "message", "sigkill_storm"]

MESSAGES = 160  # several seconds of answers: the storm outlasts a quick machine
KILLS = 8


def message(index: int) -> EmailMessage:
    """Message ``index`` of a storm, from shop@example.com."""
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = f"customer{index}@example.org"
    msg["Subject"] = f"Order {index}"
    msg.set_content("It is on its way.\n")
    return msg


def _owed(app: MailFathom) -> int:
    return app.outbox.counts().get(OutgoingEmailStage.RECORDED, 0)


def sigkill_storm(
    app: MailFathom,
    database_url: str,
    target: str,
    seed: int,
    requests: Callable[[], int] | None = None,
) -> int:
    """Workers delivering to ``target`` (what ``delivery_worker.py`` takes), killed up
    to :data:`KILLS` times while records are owed; then ``app``'s own workers finish.
    Given ``requests`` (how many requests the provider has seen), each worker is killed
    at a random moment after its first request arrived, not while it starts up (a slow
    start would otherwise take every kill). Returns how many workers were killed."""
    rng = random.Random(seed)
    kills = 0
    deadline = time.monotonic() + 200
    while kills < KILLS and _owed(app) and time.monotonic() < deadline:
        seen = requests() if requests is not None else 0
        worker = subprocess.Popen([sys.executable, str(WORKER), database_url, target])
        if requests is None:
            wait = rng.uniform(0.8, 2.5)
        else:
            while requests() == seen and worker.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)  # the worker is starting up: not yet sending
            wait = rng.uniform(0.05, 1.0)
        try:
            worker.wait(timeout=wait)  # it finished what was due
            time.sleep(0.3)  # the killed one's leases lapse (lease=1.0)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            kills += 1
    while _owed(app) and time.monotonic() < deadline:  # healthy workers finish
        app.worker(concurrency=2, lease=1.0).run(burst=True)
        time.sleep(0.2)
    return kills
