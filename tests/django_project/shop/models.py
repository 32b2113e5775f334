"""One model, so that the tests can see the application's own writes commit or roll back."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """An order; ``note`` says who wrote it (a request, a task, a job)."""

    note: models.CharField[str, str] = models.CharField(max_length=200)
