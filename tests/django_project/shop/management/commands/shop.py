"""``manage.py shop ACTION …``: what the tests do inside the project, in one process.

``mail``, ``task``, ``job`` and ``connections`` write an Order and send mail,
enqueue tasks or jobs inside one ``transaction.atomic()`` block, which
``ACTION:rollback`` rolls back by raising. ``worker`` runs ``mailfathom worker
--burst`` (one job at a time); ``orders``, ``result:ID`` and ``admin`` report.
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
from shop.tasks import record_attempt, record_note


class RolledBack(Exception):
    """Raised to leave the atomic block by rolling it back."""


class Command(BaseCommand):
    """The test project's actions, run in order in one process (Django starts once)."""

    help = "ACTION[:rollback|:ID] …: migrate mail task job connections worker orders result admin"

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
    if action == "admin":
        return _admin()
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


_ACTIONS = {"mail": _mail, "task": _task, "job": _job, "connections": _connections}


def _admin() -> dict[str, Any]:
    """The admin index as staff (and as an anonymous visitor): where the console link points."""
    from django.test import Client

    User.objects.create_superuser("ops", "ops@example.com", "pw")
    anonymous = Client().get("/admin/")
    client = Client()
    client.force_login(User.objects.get(username="ops"))
    page = client.get("/admin/").content.decode()
    return {"anonymous": anonymous.status_code, "page": page}
