"""mailfathom job handlers, found by the contrib app's ``jobs`` autodiscovery."""

import os
import sys

from django.db import connection

from mailfathom import JobContext
from mailfathom.contrib.django import job
from shop.models import Order


@job("shop.note")
def note_job(ctx: JobContext, note: str) -> None:
    """Create an Order from a job, through the ORM, on a worker thread."""
    Order.objects.create(note=note)


@job("shop.connection")
def connection_job(ctx: JobContext, note: str) -> None:
    """Say whether this thread's Django connection was still open when the job began
    (it must not be: with CONN_MAX_AGE=0 it is closed after each job, as after a request)."""
    was_open = connection.connection is not None
    Order.objects.create(note=f"{note}:open={was_open}")


@job("shop.fail", max_attempts=1)
def failing_job(ctx: JobContext, item: str) -> None:
    """Fail at once, to be dead-lettered on its only attempt (an operator's case)."""
    raise ValueError(f"no stock of {item}")


@job("shop.whoami")
def whoami_job(ctx: JobContext, n: int) -> None:
    """Record, as an Order, which process ran this job, the program it was started as,
    and the Django database it reached."""
    program = os.path.basename(sys.argv[0])
    database = f"{connection.vendor}:{connection.settings_dict['NAME']}"
    Order.objects.create(note=f"whoami:{n}:{os.getpid()}:{program}:{database}")
