"""A real delivery worker process, for the crash tests.

``python delivery_worker.py DATABASE_URL SMTP_URL [POINT]`` builds a MailFathom and runs
a worker until nothing is due. An ``http://`` URL instead of the SMTP one delivers
through :class:`~mailfathom.HttpJsonTransport` to that provider; ``ses:`` and an
endpoint URL, through :class:`~mailfathom.SesTransport` to that SES endpoint.
Given a ``POINT`` of the submission (:data:`mailfathom.delivery.phases.PHASE_POINTS`),
this process installs its own phase hook that SIGKILLs it on reaching that point:
mailfathom itself has no crash switch.
"""

from __future__ import annotations

import os
import signal
import sys

from mailfathom import HttpJsonTransport, MailFathom, SesTransport
from mailfathom.delivery.phases import PHASE_POINTS, PhaseHook, PhasePoint


def kill_at(point: str) -> PhaseHook:
    """A phase hook that kills this process, at once and without cleanup, at ``point``."""
    if point not in PHASE_POINTS:
        raise SystemExit(f"unknown point {point!r}: use one of {', '.join(PHASE_POINTS)}")

    def reached(now: PhasePoint) -> None:
        if now == point:
            os.kill(os.getpid(), signal.SIGKILL)

    return reached


def main() -> None:
    database_url, url = sys.argv[1], sys.argv[2]
    if url.startswith("ses:"):
        ses = SesTransport(
            "us-east-1",
            endpoint_url=url.removeprefix("ses:"),
            timeout=5.0,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        carrier = MailFathom(database_url, transport=ses, lease=1.0)
    elif url.startswith("http://"):
        carrier = MailFathom(database_url, transport=HttpJsonTransport(url), lease=1.0)
    else:
        carrier = MailFathom(database_url, smtp_url=url, lease=1.0)
    with carrier as app:
        if len(sys.argv) > 3:
            app.deliverer.on_phase = kill_at(sys.argv[3])
        app.worker(concurrency=1, lease=1.0).run(burst=True)


if __name__ == "__main__":
    main()
