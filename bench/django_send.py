"""Messages recorded per second through Django's ``send_mail`` / ``send_mass_mail``:
mailfathom's email backend against django-mailer's and django-post_office's.

Each system runs in a process of its own with a minimal Django project (settings
configured in code, ``migrate`` run first) on a fresh SQLite file or a fresh
PostgreSQL schema, and times two ways of sending, after a warm-up: ``send_mail``
one message per call (Django's autocommit: each call commits on its own), and
``send_mass_mail`` lists of ``--batch`` messages. Nothing is delivered: each system
only records (django-mailer's ``DbBackend``; django-post_office queued, priority
``medium``). mailfathom runs in the project's venv, the peers in
``bench/.peers/django-venv`` (``bench/django-peers-requirements.txt``: the same
Django and psycopg).

    python bench/django_send.py --messages 1000
    python bench/django_send.py --database postgresql --messages 1000

``--deliver`` times the whole way instead, on a fresh database: ``--messages`` sent
with ``send_mass_mail`` in lists of ``--batch``, then delivered to Postfix's
``smtp-sink`` on a loopback port by each system's own sender — mailfathom's worker
(``manage.py mailfathom worker --burst``: Recorded → TransmissionBegun → Sent, each
committed), django-mailer's ``send_all()`` (what ``manage.py send_mail`` runs) and
django-post_office's ``send_queued_mail_until_done()`` (what ``manage.py
send_queued_mail`` runs: one process, ``THREADS_PER_PROCESS`` threads, 5 by default) —
and reports the recording, delivery and end-to-end rates; each run checks that every
message was delivered.

    python bench/django_send.py --deliver --database postgresql --messages 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / ".peers"
REQUIREMENTS = ROOT / "bench" / "django-peers-requirements.txt"
POSTGRES_URL = os.environ.get(
    "MAILFATHOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SYSTEMS = ("mailfathom", "django-mailer", "django-post_office")


def ensure_django_peers_venv() -> str:
    """Create (or reuse) the Django peers' virtual environment; returns its python."""
    venv = PEERS / "django-venv"
    python = venv / "bin" / "python"
    marker = venv / ".requirements-sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return str(python)
    print(f"installing the Django peers' pinned environment into {venv} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], check=True
    )
    marker.write_text(wanted)
    return str(python)


def _settings(system: str, database: dict[str, Any], port: int | None = None) -> dict[str, Any]:
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
        "MAILFATHOM": {"DATABASE": "default"}
        | ({} if port is None else {"SMTP_URL": f"smtp://127.0.0.1:{port}?starttls=off"}),
        "POST_OFFICE": {"DEFAULT_PRIORITY": "medium"},
        # where the peers deliver (Django's SMTP backend), with --deliver
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": port or 25,
        "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
        # django-post_office renders every message through Django's templates
        "TEMPLATES": [{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
    }


def _child(system: str, database: dict[str, Any], messages: int, batch: int) -> dict[str, float]:
    """In the system's own process: migrate, warm up, then time both ways of sending."""
    import django
    from django.conf import settings

    settings.configure(**_settings(system, database))
    django.setup()
    from django.core.mail import send_mail, send_mass_mail
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    body = "Your order has shipped.\n" * 20

    def singles(count: int) -> None:
        for n in range(count):
            send_mail(f"Order {n}", body, None, [f"user{n}@example.com"])

    def lists(count: int) -> None:
        for start in range(0, count, batch):
            send_mass_mail(
                [
                    (f"Order {n}", body, None, [f"user{n}@example.com"])
                    for n in range(start, min(start + batch, count))
                ]
            )

    singles(50)  # warm-up: connections, prepared statements, imports
    lists(batch)
    rates = {}
    for name, run in (("send_mail", singles), ("send_mass_mail", lists)):
        started = time.perf_counter()
        run(messages)
        rates[name] = messages / (time.perf_counter() - started)
    return rates


def _deliver_child(
    system: str, database: dict[str, Any], messages: int, batch: int, port: int
) -> dict[str, float]:
    """In the system's own process: record ``messages`` (lists of ``batch``), then deliver
    them all to the sink with the system's own sender; both timed, delivery checked."""
    import django
    from django.conf import settings

    settings.configure(**_settings(system, database, port))
    django.setup()
    from django.core.mail import send_mass_mail
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    body = "Your order has shipped.\n" * 20
    started = time.perf_counter()
    for start in range(0, messages, batch):
        send_mass_mail(
            [
                (f"Order {n}", body, None, [f"user{n}@example.com"])
                for n in range(start, min(start + batch, messages))
            ]
        )
    recorded = time.perf_counter()
    delivered = _deliver(system)
    finished = time.perf_counter()
    if delivered != messages:
        raise SystemExit(f"{system}: {delivered} of {messages} messages were delivered")
    return {
        "record": messages / (recorded - started),
        "deliver": messages / (finished - recorded),
        "end_to_end": messages / (finished - started),
    }


def _deliver(system: str) -> int:
    """Deliver everything queued, as the system's own command does; how many were sent."""
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

    send_queued_mail_until_done(processes=1)
    done: int = Email.objects.filter(status=STATUS.sent).count()
    return done


def _database(kind: str, folder: Path) -> tuple[dict[str, Any], str | None]:
    """Django's DATABASES entry on a fresh SQLite file or PostgreSQL schema (its name)."""
    if kind == "sqlite":
        name = str(folder / f"{uuid.uuid4().hex[:8]}.sqlite3")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name}, None
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    schema = f"mf_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    params = conninfo_to_dict(POSTGRES_URL)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.get("dbname", "postgres"),
        "USER": params.get("user", ""),
        "PASSWORD": params.get("password", ""),
        "HOST": params.get("host", ""),
        "PORT": params.get("port", ""),
        "OPTIONS": {"options": f"-c search_path={schema}"},
    }, schema


def _drop(schema: str | None) -> None:
    if schema is not None:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextmanager
def _sink(wanted: bool, aiosmtpd: bool) -> Iterator[int | None]:
    """A running Postfix ``smtp-sink`` (or aiosmtpd's Sink) when delivering, else None;
    yields its port."""
    if not wanted:
        yield None
        return
    sys.path.insert(0, str(ROOT))
    from bench.email_rows import sink
    from bench.environment import ensure_smtp_sink

    if aiosmtpd:
        from bench.outbox_throughput import _free_port, _start_sink

        port = _free_port()
        process = _start_sink(None, port)
        try:
            yield port
        finally:
            process.terminate()
            process.wait(10)
        return
    with sink(ensure_smtp_sink()) as port:
        yield port


def main() -> int:
    """Run each system in its own process, print a table and (``--json``) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--deliver",
        action="store_true",
        help="record, then deliver to a local smtp-sink: end-to-end rates",
    )
    parser.add_argument(
        "--aiosmtpd",
        action="store_true",
        help="with --deliver: deliver to aiosmtpd's Sink instead of Postfix's smtp-sink",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--settings-json", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        database = json.loads(args.settings_json)
        if args.port is not None:
            rates = _deliver_child(args.child, database, args.messages, args.batch, args.port)
        else:
            rates = _child(args.child, database, args.messages, args.batch)
        print(json.dumps(rates))
        return 0
    systems = args.systems.split(",")
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(SYSTEMS)}")
    # the peers' venv is installed only when a peer runs
    peers = ensure_django_peers_venv() if set(systems) - {"mailfathom"} else sys.executable
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder, _sink(args.deliver, args.aiosmtpd) as port:
        for system in systems:
            database, schema = _database(args.database, Path(folder))
            python = sys.executable if system == "mailfathom" else peers
            sizes = ["--messages", str(args.messages), "--batch", str(args.batch)]
            child = ["--child", system, "--settings-json", json.dumps(database), *sizes]
            if port is not None:
                child += ["--port", str(port)]
            try:
                done = subprocess.run(
                    [python, str(Path(__file__).resolve()), *child],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=1200,
                    cwd=folder,  # the peers' senders leave their lock files here
                    env={k: v for k, v in os.environ.items() if not k.startswith("MAILFATHOM_")},
                )
            finally:
                _drop(schema)
            if done.returncode != 0:
                raise SystemExit(f"{system} failed:\n{done.stdout}{done.stderr}")
            results[system] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"database": args.database, "results": results}))
        return 0
    if args.deliver:
        print(f"Django send + delivery on {args.database}, {args.messages} messages (msg/s)")
        print(f"{'system':<20} {'record':>10} {'deliver':>10} {'end to end':>12}")
        for system, rates in results.items():
            print(
                f"{system:<20} {rates['record']:>10,.0f} {rates['deliver']:>10,.0f} "
                f"{rates['end_to_end']:>12,.0f}"
            )
        return 0
    print(f"Django send path on {args.database}, {args.messages} messages (msg/s)")
    print(f"{'system':<20} {'send_mail':>12} {'send_mass_mail':>16}")
    for system, rates in results.items():
        print(f"{system:<20} {rates['send_mail']:>12,.0f} {rates['send_mass_mail']:>16,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
