"""Async views as docs/django.md writes them: an order and its job in one transaction,
and a job enqueued with no transaction of the view's own."""

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import HttpRequest, JsonResponse

from mailfathom import AsyncMailFathom
from mailfathom.contrib.django import enqueue, get_app
from shop.models import Order


class Refused(Exception):
    """Leaves the atomic block by rolling it back (the order was refused)."""


@sync_to_async
def place_order(note: str, *, refuse: bool) -> int:
    """Django's transactions are sync: the block runs on Django's thread for the ORM."""
    with transaction.atomic():
        order = Order.objects.create(note=note)
        enqueue("shop.note", {"note": f"{note}:job"})  # in the block's transaction
        if refuse:
            raise Refused
    return int(order.pk)


async def checkout(request: HttpRequest) -> JsonResponse:
    """An order and its job: both, or (refused) neither."""
    try:
        order_id = await place_order(request.POST["note"], refuse="refuse" in request.POST)
    except Refused:
        return JsonResponse({"refused": True}, status=409)
    return JsonResponse({"order": order_id})


async def remind(request: HttpRequest) -> JsonResponse:
    """A job with no transaction of the view's own: awaited, never blocking the loop."""
    job = await AsyncMailFathom(get_app()).enqueue("shop.note", {"note": "reminder"})
    return JsonResponse({"job": job.id})
