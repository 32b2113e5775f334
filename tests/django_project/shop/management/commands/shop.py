"""``manage.py shop ACTION [--rollback]``: what the tests do inside the project.

Each action writes an Order and sends mail, enqueues a task or a job inside one
``transaction.atomic()`` block, which ``--rollback`` then rolls back by raising.
It prints one JSON line describing what it did.
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
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.test import Client
from django_tasks import default_task_backend

from mailfathom.contrib.django import enqueue
from shop.models import Order
from shop.tasks import record_attempt, record_note


class RolledBack(Exception):
    """Raised to leave the atomic block by rolling it back."""


class Command(BaseCommand):
    """The test project's actions."""

    help = "mail | task | job | result ID | orders | admin"

    def add_arguments(self, parser: CommandParser) -> None:
        """The action, its argument, and --rollback."""
        parser.add_argument("action")
        parser.add_argument("value", nargs="?")
        parser.add_argument("--rollback", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run one action and print its JSON line."""
        action, rollback = options["action"], options["rollback"]
        if action == "orders":
            self._print(sorted(Order.objects.values_list("note", flat=True)))
        elif action == "result":
            result = default_task_backend.get_result(options["value"])
            self._print({"status": str(result.status), "attempts": result.attempts})
        elif action == "admin":
            self._print(_admin())
        else:
            done: dict[str, Any] = {}
            try:
                with transaction.atomic():
                    Order.objects.create(note=f"{action}-order")
                    done = _ACTIONS[action]()
                    if rollback:
                        raise RolledBack
            except RolledBack:
                done["rolled_back"] = True
            self._print(done)

    def _print(self, value: object) -> None:
        self.stdout.write(json.dumps(value))


def _mail() -> dict[str, Any]:
    counts = [
        send_mail("plain", "Hello from send_mail.", None, ["ann@example.com"]),
        EmailMessage("message", "Hello from EmailMessage.", to=["bob@example.com"],
                     bcc=["hidden@example.com"]).send(),
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


_ACTIONS = {"mail": _mail, "task": _task, "job": _job}


def _admin() -> dict[str, Any]:
    """The admin index as staff (and as an anonymous visitor): where the console link points."""
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    anonymous = Client().get("/admin/")
    client = Client()
    client.force_login(User.objects.get(username="ops"))
    page = client.get("/admin/").content.decode()
    return {"anonymous": anonymous.status_code, "page": page}
