"""A Django task that writes through the ORM from the worker."""

from django_tasks import TaskContext, task

from shop.models import Order


@task()
def record_note(note: str) -> None:
    """Create an Order whose note says the task ran."""
    Order.objects.create(note=note)


@task(takes_context=True)
def record_attempt(context: TaskContext, note: str) -> None:
    """Create an Order whose note carries the attempt number."""
    Order.objects.create(note=f"{note}:attempt{context.attempt}")


@task()
def total(prices: list[int]) -> dict[str, object]:
    """Returns a result: the sum, and the prices as a tuple (Django makes it a list)."""
    return {"total": sum(prices), "prices": tuple(prices)}


@task()
def total_at() -> object:
    """Returns what JSON cannot hold: the task fails, as on Django's own backends."""
    from datetime import datetime

    return datetime.now()
