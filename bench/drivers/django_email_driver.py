"""Email through Django's ``send_mail`` / ``send_mass_mail``: mailfathom's email backend,
django-mailer and django-post_office, each with its own sender.

A minimal Django project, settings configured in code, ``migrate`` run before the
clock starts, on the fresh database the harness made. mailfathom runs in the
project's venv, the peers in ``bench/.peers/django-venv``
(``bench/django-peers-requirements.txt``: the same Django and psycopg).

``send``: ``send_mail`` one message per call (Django's autocommit: a commit each),
after a warm-up; nothing is delivered. ``deliver``: ``send_mass_mail`` in lists of
``spec['batch']`` (the record time), then everything delivered to the sink by the
system's own sender (the delivery time): ``manage.py mailfathom worker --burst``
(Recorded → TransmissionBegun → Sent, each committed), django-mailer's ``send_all()``
(what ``manage.py send_mail`` runs), django-post_office's
``send_queued_mail_until_done()`` (what ``manage.py send_queued_mail`` runs;
``spec['processes']`` is its ``--processes``). Subjects are ``Order <n>``, unique in a
run, so that the sink can count each message; the bodies make 4 KB messages, as in
the other email rows.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from bench.drivers.protocol import Spec, await_go, run_driver

SYSTEMS = ("mailfathom", "django-mailer", "django-post_office")
BODY = "Your order has shipped; the parcel is on its way to you.\n" * 68
"""About 3.9 KB of text: with Django's headers, a 4 KB message."""
WARM_UP = 50
"""``send_mail`` calls before the clock starts (connections, imports, statements)."""


def subject(index: int) -> str:
    """The Subject of message ``index``: how the sink tells the messages apart."""
    return f"Order {index}"


def django_database(url: str) -> dict[str, Any]:
    """Django's ``DATABASES`` entry for a harness database URL."""
    if url.startswith("sqlite:///"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url.removeprefix("sqlite:///")}
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/") or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


def settings(system: str, database: dict[str, Any], port: int, scratch: Path) -> dict[str, Any]:
    """The whole Django project: the system's app and email backend, one database."""
    apps = {
        "mailfathom": ["mailfathom.contrib.django"],
        "django-mailer": ["mailer"],
        "django-post_office": ["post_office"],
    }[system]
    backend = {
        "mailfathom": "mailfathom.contrib.django.EmailBackend",
        "django-mailer": "mailer.backend.DbBackend",
        "django-post_office": "post_office.EmailBackend",
    }[system]
    return {
        "SECRET_KEY": "bench",
        "USE_TZ": True,
        "DEBUG": False,
        "INSTALLED_APPS": ["django.contrib.contenttypes", "django.contrib.auth", *apps],
        "DATABASES": {"default": database},
        "EMAIL_BACKEND": backend,
        "DEFAULT_FROM_EMAIL": "shop@example.com",
        "MAILFATHOM": {"DATABASE": "default", "SMTP_URL": f"smtp://127.0.0.1:{port}?starttls=off"},
        "POST_OFFICE": {"DEFAULT_PRIORITY": "medium"},
        # where the peers deliver (Django's SMTP backend)
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": port,
        # django-mailer's lock file, instead of ./send_mail.lock
        "MAILER_LOCK_PATH": str(scratch / "mailer"),
        "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
        # django-post_office renders every message through Django's templates
        "TEMPLATES": [{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
    }


def _setup(spec: Spec, scratch: Path) -> None:
    import django
    from django.conf import settings as django_settings
    from django.core.management import call_command

    database = django_database(spec["url"])
    django_settings.configure(**settings(spec["system"], database, spec["port"], scratch))
    django.setup()
    call_command("migrate", verbosity=0)


def send(spec: Spec) -> dict[str, Any]:
    """``send_mail`` ``spec['n']`` messages, one per call, after a warm-up."""
    with tempfile.TemporaryDirectory() as scratch:
        _setup(spec, Path(scratch))
        from django.core.mail import send_mail

        for n in range(WARM_UP):
            send_mail(f"Warm-up {n}", BODY, None, [f"user{n}@example.com"])
        start = await_go()
        for n in range(spec["n"]):
            send_mail(subject(n), BODY, None, [f"user{n}@example.com"])
        end = time.monotonic()
    return {"start": start, "end": end, "count": spec["n"]}


def deliver(spec: Spec) -> dict[str, Any]:
    """``send_mass_mail`` ``spec['n']`` messages in lists of ``spec['batch']``, then
    deliver them all; the moment recording ended and how many the system marks sent."""
    n, batch = spec["n"], spec["batch"]
    with tempfile.TemporaryDirectory() as scratch:
        _setup(spec, Path(scratch))
        from django.core.mail import get_connection, send_mass_mail
        from django.db import connection

        connection.ensure_connection()
        get_connection()  # the backend imported before the clock starts
        start = await_go()
        for first in range(0, n, batch):
            send_mass_mail(
                [
                    (subject(i), BODY, None, [f"user{i}@example.com"])
                    for i in range(first, min(first + batch, n))
                ]
            )
        recorded = time.monotonic()
        sent = _deliver(spec["system"], int(spec.get("processes", 1)), Path(scratch))
        end = time.monotonic()
    return {"start": start, "recorded": recorded, "end": end, "count": sent}


def _deliver(system: str, processes: int, scratch: Path) -> int:
    """Deliver everything queued, as the system's own command does; how many it marks
    sent in its own table."""
    if system == "mailfathom":
        from django.core.management import call_command

        from mailfathom import OutgoingEmailStage
        from mailfathom.contrib.django.app import get_app

        call_command("mailfathom", "worker", "--burst")
        return get_app().outbox.counts()[OutgoingEmailStage.SENT]
    if system == "django-mailer":
        from mailer.engine import send_all  # type: ignore[import-not-found]
        from mailer.models import RESULT_SUCCESS, MessageLog  # type: ignore[import-not-found]

        send_all()
        sent: int = MessageLog.objects.filter(result=RESULT_SUCCESS).count()
        return sent
    from post_office.mail import send_queued_mail_until_done  # type: ignore[import-not-found]
    from post_office.models import STATUS, Email  # type: ignore[import-not-found]

    send_queued_mail_until_done(str(scratch / "post_office"), processes)
    done: int = Email.objects.filter(status=STATUS.sent).count()
    return done


if __name__ == "__main__":
    run_driver({"send": send, "deliver": deliver})
