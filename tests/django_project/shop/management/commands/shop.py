"""``manage.py shop ACTION …``: what the tests do inside the project, in one process.

``mail``, ``task``, ``job``, ``connections`` and ``whoami`` write an Order and send mail,
enqueue tasks or jobs inside one ``transaction.atomic()`` block, which
``ACTION:rollback`` rolls back by raising. ``worker`` runs ``mailfathom worker
--burst`` (one job at a time); ``orders``, ``result:ID``, ``returned:ID`` and ``admin`` report;
``totals`` enqueues tasks that return values; ``typo`` enqueues a kind the project does not
register (refused).
The command prints one JSON list: what each action did.
"""

import json
from typing import Any

from django.contrib.auth.models import User
from django.core.mail import (
    EmailMessage,
    EmailMultiAlternatives,
    get_connection,
    send_mail,
    send_mass_mail,
)
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django_tasks import default_task_backend

from mailfathom.contrib.django import enqueue
from shop.models import Order
from shop.tasks import record_attempt, record_note, total, total_at


class RolledBack(Exception):
    """Raised to leave the atomic block by rolling it back."""


class Command(BaseCommand):
    """The test project's actions, run in order in one process (Django starts once)."""

    help = (
        "ACTION[:rollback|:ID] …: migrate mail task job connections whoami worker orders result "
        "admin help console admin_views async_views typo"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """The actions, each ``name`` or ``name:argument``."""
        parser.add_argument("actions", nargs="+")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run each action and print one JSON list: what each one did."""
        done = [_run(*action.partition(":")[::2]) for action in options["actions"]]
        self.stdout.write(json.dumps(done))


def _run(action: str, argument: str) -> Any:
    if action == "migrate":  # Django's tables, then mailfathom's
        call_command("migrate", verbosity=0)
        call_command("mailfathom", "migrate")
        return None
    if action == "worker":  # the same command as manage.py mailfathom worker --burst
        call_command("mailfathom", "worker", "--burst", "--concurrency", "1")
        return None
    if action == "orders":
        return sorted(Order.objects.values_list("note", flat=True))
    if action == "result":
        result = default_task_backend.get_result(argument)
        return {"status": str(result.status), "attempts": result.attempts}
    if action == "returned":
        return _returned(argument)
    if action == "totals":  # tasks that return something, enqueued outside any block
        return [total.enqueue([3, 4]).id, total_at.enqueue().id, record_note.enqueue("none").id]
    if action == "admin":
        return _admin()
    if action == "help":
        return _help()
    if action == "console":
        return _console()
    if action == "admin_views":
        return _admin_views()
    if action == "trips":
        return _trips()
    if action == "badmail":
        return _badmail()
    if action == "async_views":
        return _async_views()
    if action == "typo":  # a kind the project does not register: refused, nothing written
        from mailfathom import InvalidInput

        try:
            enqueue("shop.nte", {"note": "typo"})
        except InvalidInput as exc:
            return {"refused": str(exc)}
        return {"refused": None}
    done: dict[str, Any] = {}
    try:
        with transaction.atomic():
            Order.objects.create(note=f"{action}-order")
            done = _ACTIONS[action]()
            if argument == "rollback":
                raise RolledBack
    except RolledBack:
        done["rolled_back"] = True
    return done


def _returned(result_id: str) -> dict[str, Any]:
    """The task's result with what the task returned, or why Django refuses to say."""
    result = default_task_backend.get_result(result_id)
    done: dict[str, Any] = {"status": str(result.status), "attempts": result.attempts}
    try:
        done["return_value"] = result.return_value
    except ValueError as exc:  # Django's: the task failed or has not finished
        done["refused"] = str(exc)
    done["errors"] = [error.exception_class_path for error in result.errors]
    return done


def _mail() -> dict[str, Any]:
    counts = [
        send_mail("plain", "Hello from send_mail.", None, ["ann@example.com"]),
        EmailMessage(
            "message",
            "Hello from EmailMessage.",
            to=["bob@example.com"],
            bcc=["hidden@example.com"],
        ).send(),
    ]
    rich = EmailMultiAlternatives("alternatives", "Text part.", to=["cy@example.com"])
    rich.attach_alternative("<p>HTML part.</p>", "text/html")
    counts.append(rich.send())
    counts.append(
        send_mass_mail(
            [
                ("mass 1", "First.", None, ["dee@example.com"]),
                ("mass 2", "Second.", None, ["eve@example.com"]),
            ]
        )
    )
    with get_connection() as connection:
        counts.append(connection.send_messages([]))  # nothing to send: 0
    return {"sent": counts}


def _task() -> dict[str, Any]:
    plain = record_note.enqueue("from-task")
    with_context = record_attempt.enqueue("from-context-task")
    return {"results": [plain.id, with_context.id], "status": str(plain.status)}


def _job() -> dict[str, Any]:
    job = enqueue("shop.note", {"note": "from-job"})
    return {"job": job.id}


def _connections() -> dict[str, Any]:
    jobs = [enqueue("shop.connection", {"note": f"job{n}"}) for n in (1, 2, 3)]
    return {"jobs": [job.id for job in jobs]}


def _whoami() -> dict[str, Any]:
    jobs = [enqueue("shop.whoami", {"n": n}) for n in range(12)]
    return {"jobs": [job.id for job in jobs]}


def _badmail() -> dict[str, Any]:
    """A list with one bad address in the middle, sent inside ``atomic()`` and caught there:
    nothing of the list is recorded, and the block goes on and commits."""
    batch = [
        ("bad 1", "Good.", None, ["ann@example.com"]),
        ("bad 2", "Bad.", None, ["two..dots@example.com"]),
        ("bad 3", "Good.", None, ["bob@example.com"]),
    ]
    done: dict[str, Any] = {}
    with transaction.atomic():
        Order.objects.create(note="badmail-before")
        try:
            send_mass_mail(batch)
        except Exception as exc:
            done["error"] = str(exc)
        done["silent"] = send_mass_mail(batch, fail_silently=True)
        Order.objects.create(note="badmail-after")
    return done


def _trips() -> dict[str, Any]:
    """Round trips to PostgreSQL of each way of sending, on Django's connection: the runs
    of messages the client sent before reading an answer, in libpq's own trace of the
    wire protocol (a run of "F" lines is one flight; the answer's "B" lines end it)."""
    import tempfile

    from django.db import connection
    from psycopg import pq

    def counted(send: Any) -> int:
        connection.ensure_connection()
        pgconn = connection.connection.pgconn
        with tempfile.TemporaryFile() as trace:
            pgconn.trace(trace.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            try:
                send()
            finally:
                pgconn.untrace()
            trace.seek(0)
            lines = trace.read().decode().splitlines()
        # a message's line starts with its side and a tab (a query's text may go on over
        # further lines, which are not messages)
        sides = [line[0] for line in lines if line[:2] in ("F\t", "B\t")]
        return sum(1 for i, side in enumerate(sides) if side == "F" and sides[i - 1 : i] != ["F"])

    def one() -> None:
        send_mail("trip", "One message.", None, ["ann@example.com"])

    def mass() -> None:
        send_mass_mail([(f"trip {n}", "Mass.", None, [f"u{n}@example.com"]) for n in range(5)])

    done: dict[str, Any] = {"autocommit_first": counted(one), "autocommit": counted(one)}
    with transaction.atomic():
        Order.objects.create(note="trips-order")  # the caller's transaction has begun
        done["atomic"] = counted(one)
        done["atomic_mass"] = counted(mass)
        done["atomic_message"] = counted(
            lambda: EmailMessage("trip", "Bcc.", to=["b@example.com"], bcc=["c@example.com"]).send()
        )
    with transaction.atomic():
        done["atomic_first_statement"] = counted(one)  # psycopg's BEGIN comes first
    try:  # a send rolled back with its block: the statement stays prepared, usable
        with transaction.atomic():
            one()
            raise RolledBack
    except RolledBack:
        done["after_rollback"] = counted(one)
    for _ in range(8):  # Django's own statement, run often: Django leaves it unprepared
        Order.objects.filter(note="trips-order").count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        done["prepared"] = [row[0] for row in cursor.fetchall()]
    done["threshold"] = connection.connection.prepare_threshold
    return done


_ACTIONS = {
    "mail": _mail,
    "task": _task,
    "job": _job,
    "connections": _connections,
    "whoami": _whoami,
}


def _async_views() -> list[Any]:
    """The async views, served by Django's async test client on an event loop."""
    import asyncio

    from django.test import AsyncClient

    async def requests() -> list[Any]:
        client = AsyncClient()
        answers = [
            await client.post("/checkout/", {"note": "async-order"}),
            await client.post("/checkout/", {"note": "refused-order", "refuse": "1"}),
            await client.post("/remind/"),
        ]
        return [(answer.status_code, answer.json()) for answer in answers]

    return asyncio.run(requests())


def _admin() -> dict[str, Any]:
    """The admin index as staff (and as an anonymous visitor): where the console link points."""
    from django.test import Client

    User.objects.create_superuser("ops", "ops@example.com", "pw")
    anonymous = Client().get("/admin/")
    client = Client()
    client.force_login(User.objects.get(username="ops"))
    page = client.get("/admin/").content.decode()
    return {"anonymous": anonymous.status_code, "page": page}


def _help() -> dict[str, Any]:
    """``manage.py mailfathom [COMMAND …] --help`` for every command: those whose help
    offers ``--app`` or ``--database`` (refused here), and how many were read."""
    import contextlib
    import io

    import click

    from mailfathom.cli import cli
    from mailfathom.contrib.django.management.commands.mailfathom import Command as Mailfathom

    paths: list[list[str]] = [[]]
    pending: list[tuple[list[str], click.Command]] = [([], cli)]
    while pending:
        path, command = pending.pop()
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                paths.append([*path, name])
                pending.append(([*path, name], sub))
    offering = []
    for path in paths:
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):  # as manage.py runs it, past Django's parser
            Mailfathom().run_from_argv(["manage.py", "mailfathom", *path, "--help"])
        if "--app" in shown.getvalue() or "--database" in shown.getvalue():
            offering.append(" ".join(path))
    return {"read": len(paths), "offering": offering}


def _console() -> dict[str, Any]:
    """The console under /mailfathom of the project's ASGI app (the ``asgi.py`` of
    docs/django.md, in ``MF_TEST_ASGI``), behind Django's staff login: what each kind of
    visitor gets, and who the audit trail names."""
    import os

    from django.conf import settings
    from django.contrib.auth.models import Permission
    from django.test import Client
    from starlette.testclient import TestClient

    from mailfathom.contrib.django import get_app

    asgi: dict[str, Any] = {}
    exec(os.environ["MF_TEST_ASGI"], asgi)
    application = asgi["application"]
    mf = get_app()
    held = [enqueue("shop.note", {"note": f"held{n}"}, hold=True).id for n in (1, 2)]

    def visitor(user: User | None) -> TestClient:
        client = TestClient(application, base_url="http://testserver")
        if user is not None:
            django = Client()
            django.force_login(user)
            cookie = settings.SESSION_COOKIE_NAME
            client.cookies.set(cookie, django.cookies[cookie].value)
        return client

    admin = User.objects.create_superuser("boss", "boss@example.com", "pw")
    operator = User.objects.create_user("olga", is_staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="operate_console"))
    viewer = User.objects.create_user("vic", is_staff=True)
    customer = User.objects.create_user("carl")
    done: dict[str, Any] = {}
    for name, user in [("anonymous", None), ("customer", customer)]:
        answer = visitor(user).get("/mailfathom/jobs", follow_redirects=False)
        done[name] = [answer.status_code, answer.headers.get("location")]
    with visitor(viewer) as client:
        page = client.get("/mailfathom/jobs")
        release = client.post(f"/mailfathom/api/jobs/{held[0]}/release", json={})
        done["viewer"] = [page.status_code, release.status_code]
        done["overview_hint"] = "<code>python manage.py mailfathom worker</code>" in (
            client.get("/mailfathom/").text
        )
    for (name, user), job_id in zip([("operator", operator), ("admin", admin)], held, strict=True):
        with visitor(user) as client:
            release = client.post(f"/mailfathom/api/jobs/{job_id}/release", json={})
            done[name] = [release.status_code, [e.actor for e in mf.jobs.events(job_id)]]
    return done


def _admin_views() -> dict[str, Any]:
    """The admin's Jobs and Emails pages and moves, for each kind of user: what each got,
    and what the audit trails say."""
    import re

    from django.contrib.auth.models import Permission
    from django.db import connection
    from django.test import Client

    from mailfathom.contrib.django import get_app

    mf = get_app()
    failed = [enqueue("shop.fail", {"item": item}).id for item in ("socks", "hats")]
    call_command("mailfathom", "worker", "--burst", "--concurrency", "1")
    held = enqueue("shop.note", {"note": "held"}, hold=True).id
    send_mail("unknown", "Was it sent?", None, ["ann@example.com", "bob@example.com"])
    (email,) = mf.outbox.list()
    with connection.cursor() as cursor:  # as a worker that crashed after sending the body
        cursor.execute(
            "UPDATE mf_outbox SET job_id = NULL, stage = 'TransmissionBegun', "
            "transmission_begun_at = created_at, body_transmissions = 1 WHERE id = %s",
            [email.id],
        )

    def grant(user: User, *codenames: str) -> User:
        user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
        return User.objects.get(pk=user.pk)  # permissions are cached per instance

    boss = User.objects.create_superuser("boss", "boss@example.com", "pw")
    vic = grant(User.objects.create_user("vic", is_staff=True), "view_job", "view_email")
    rita = grant(
        User.objects.create_user("rita", is_staff=True),
        *("view_job", "view_email", "requeue_job", "resolve_email"),
    )
    carl = User.objects.create_user("carl")

    def client(user: User) -> Client:
        logged = Client()
        logged.force_login(user)
        return logged

    def buttons(page: str) -> list[str]:
        return sorted(re.findall(r'name="move" value="(\w+)"', page))

    jobs, emails = "/admin/mailfathom/job/", "/admin/mailfathom/email/"
    done: dict[str, Any] = {"failed": failed, "held": held, "email": email.id}
    done["customer"] = client(carl).get(jobs).status_code
    viewer = client(vic)
    index = viewer.get("/admin/").content.decode()
    done["index"] = [jobs in index, emails in index]
    listing = viewer.get(jobs + "?state=DeadLettered").content.decode()
    done["listed"] = sorted(int(i) for i in re.findall(r'job/(\d+)/">', listing))
    page = viewer.get(f"{jobs}{failed[0]}/").content.decode()
    done["attempt_shown"] = "no stock of socks" in page
    done["viewer_buttons"] = buttons(page)
    done["viewer_requeue"] = viewer.post(f"{jobs}{failed[0]}/requeue/").status_code
    operator = client(rita)
    done["operator_buttons"] = buttons(operator.get(f"{jobs}{failed[0]}/").content.decode())
    done["operator_requeue"] = operator.post(
        f"{jobs}{failed[0]}/requeue/", {"reason": "restocked"}
    ).status_code
    done["operator_drop"] = operator.post(f"{jobs}{failed[1]}/drop/").status_code
    done["operator_release"] = operator.post(f"{jobs}{held}/release/").status_code
    admin = client(boss)
    done["admin_buttons"] = buttons(admin.get(f"{jobs}{failed[1]}/").content.decode())
    done["admin_drop"] = admin.post(f"{jobs}{failed[1]}/drop/").status_code
    done["admin_release"] = admin.post(f"{jobs}{held}/release/").status_code
    email_page = viewer.get(f"{emails}{email.id}/").content.decode()
    done["email_page"] = [
        "TransmissionBegun" in email_page,
        "ann@example.com" in email_page and "bob@example.com" in email_page,
        'id="mailfathom-resolve"' in email_page,
    ]
    done["viewer_resolve"] = viewer.post(
        f"{emails}{email.id}/resolve/", {"resolution": "delivered", "reason": "seen"}
    ).status_code
    done["operator_resolve_form"] = 'id="mailfathom-resolve"' in (
        operator.get(f"{emails}{email.id}/").content.decode()
    )
    done["operator_resolve"] = operator.post(
        f"{emails}{email.id}/resolve/",
        {"resolution": "delivered", "reason": "the server log shows it accepted"},
    ).status_code
    done["states"] = [mf.jobs.get(i).state.value for i in [*failed, held]]
    done["stage"] = mf.outbox.get(email.id).stage.value
    done["job_actors"] = [[e.actor for e in mf.jobs.events(i)] for i in [*failed, held]]
    done["email_actors"] = [e.actor for e in mf.outbox.events(email.id)]
    return done
