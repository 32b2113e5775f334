"""``BatchIds``: the ids a batch call wrote or found, compactly, in the order it was given.

Internal: not part of the public API (:mod:`mailfathom` exports ``BatchIds``).

``mf.enqueue_many(..., returning="ids")`` and ``mf.outbox.record_many(...,
returning="ids")`` return one instead of a list of full objects, so that a batch of a
million costs 8 bytes per item (an ``array('q')`` of ids) rather than half a kilobyte:
with an iterable of input consumed chunk by chunk, such a call holds a chunk's worth of
memory whatever its size. The objects themselves are read when wanted
(``mf.jobs.get(id)``, ``mf.outbox.get(id)``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

__all__ = ["BatchIds"]


class BatchIds(Sequence[int]):
    """The id of each item of a batch, in the order of the input: a read-only sequence of
    ints, 8 bytes each.

    An item whose idempotency key already existed has the id of the job (or record) that
    holds the key, and :meth:`created` says False for it; :attr:`created_count` counts
    the items this call created. Two ``BatchIds`` are equal when their ids and their
    created items are.
    """

    __slots__ = ("_existing", "_ids")

    def __init__(self) -> None:
        self._ids = array("q")
        # positions (ascending) whose key already existed: usually none, so one
        # position per such item costs nothing for a batch without keys
        self._existing = array("q")

    def add_created(self, ids: Iterable[int]) -> None:
        """Append the ids of items this call created (the batch calls fill it)."""
        self._ids.extend(ids)

    def add_existing(self, item_id: int) -> None:
        """Append the id of an item whose idempotency key already existed."""
        self._existing.append(len(self._ids))
        self._ids.append(item_id)

    @property
    def created_count(self) -> int:
        """How many items this call created (the others' keys already existed)."""
        return len(self._ids) - len(self._existing)

    def created(self, index: int) -> bool:
        """Whether the ``index``-th item was created by this call (False: its idempotency
        key already existed and its id is the existing one's)."""
        position = range(len(self._ids))[index]  # IndexError, negative indexes, as a list
        found = bisect_left(self._existing, position)
        return not (found < len(self._existing) and self._existing[found] == position)

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return self._ids[index].tolist()
        return self._ids[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchIds):
            return NotImplemented
        return self._ids == other._ids and self._existing == other._existing

    __hash__ = None  # type: ignore[assignment]  # mutable while its call fills it

    def __repr__(self) -> str:
        return f"<BatchIds: {len(self._ids)} ids, {self.created_count} created>"
