"""A mailfathom job handler, found by the contrib app's ``jobs`` autodiscovery."""

from mailfathom import JobContext
from mailfathom.contrib.django import job

from shop.models import Order


@job("shop.note")
def note_job(ctx: JobContext, note: str) -> None:
    """Create an Order from a job, through the ORM, on a worker thread."""
    Order.objects.create(note=note)
