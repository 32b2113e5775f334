"""Reading a batch call's input chunk by chunk: ``enqueue_many`` and ``record_many``.

Internal: not part of the public API. A batch may be any iterable (a generator
included); it is read ``size`` items at a time, so that a call holds one chunk of its
input, never the whole. The per-item inputs given beside it (idempotency keys,
envelopes) are read in step and their length checked against it as they go.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any, Generic, TypeVar

from mailfathom.errors import InvalidInput

__all__ = ["Column", "split_first"]

T = TypeVar("T")

#: What an exhausted iterator gives ``next``.
_END: Any = object()


def split_first(items: Iterable[T], size: int) -> tuple[list[T], Iterator[list[T]] | None]:
    """The first ``size`` items, and an iterator of the following chunks of ``size`` (None
    when there are none: the batch is one chunk), each read only when asked for."""
    it = iter(items)
    first = list(islice(it, size))
    following = next(it, _END)
    if following is _END:
        return first, None
    rest = chain((following,), it)

    def more() -> Iterator[list[T]]:
        while part := list(islice(rest, size)):
            yield part

    return first, more()


class Column(Generic[T]):
    """One optional per-item input read in step with the batch: ``take(n)`` gives the
    next ``n`` entries (None each when it was not given), ``finish(total)`` refuses
    entries left over; either way nothing is written (the error rolls back)."""

    def __init__(
        self, name: str, given: Iterable[T | None] | None, items: str, *, note: str = ""
    ) -> None:
        self.name = name
        self.items = None if given is None else iter(given)
        self._noun = items
        self._note = note

    def take(self, count: int) -> list[T | None]:
        """The next ``count`` entries; an :class:`InvalidInput` when fewer are left."""
        if self.items is None:
            return [None] * count
        part: list[T | None] = list(islice(self.items, count))
        if len(part) != count:
            raise InvalidInput(
                f"{self.name} has fewer entries than {self._noun}: give one (or None) per "
                f"{self._noun.rstrip('s')}{self._note}"
            )
        return part

    def finish(self, total: int) -> None:
        """Refuse entries left over once the ``total`` items of the batch are read."""
        if self.items is not None and next(self.items, _END) is not _END:
            raise InvalidInput(
                f"{self.name} has more entries than the {total} {self._noun}: give one (or "
                f"None) per {self._noun.rstrip('s')}{self._note}"
            )
