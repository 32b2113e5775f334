"""A real delivery worker process delivering through Django's SMTP backend, for the crash
tests of ``DjangoBackendTransport``.

``python django_delivery_worker.py DATABASE_URL SMTP_PORT [POINT]`` configures Django,
builds a MailFathom whose transport is Django's SMTP backend to 127.0.0.1:SMTP_PORT, and
runs a worker until nothing is due; given a ``POINT`` it SIGKILLs itself on reaching it
(``delivery_worker.kill_at``).
"""

from __future__ import annotations

import sys

import django
from django.conf import settings

from delivery_worker import kill_at
from mailfathom import MailFathom
from mailfathom.contrib.django import DjangoBackendTransport


def main() -> None:
    database_url, port = sys.argv[1], int(sys.argv[2])
    settings.configure()
    django.setup()
    transport = DjangoBackendTransport(
        "django.core.mail.backends.smtp.EmailBackend", host="127.0.0.1", port=port, timeout=5
    )
    with MailFathom(database_url, transport=transport, lease=1.0) as app:
        if len(sys.argv) > 3:
            app.deliverer.on_phase = kill_at(sys.argv[3])
        app.worker(concurrency=1, lease=1.0).run(burst=True)


if __name__ == "__main__":
    main()
