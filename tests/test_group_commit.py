"""Group commit: overlapping writes of many threads share one transaction, on both stores.

Real SQLite files and a real PostgreSQL schema; real threads. The first write is
held open so that the writes after it queue up behind its leader, which makes the
batching observable (count the transactions) instead of a matter of timing luck.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from mailfathom.store import open_store
from mailfathom.store.database import Cursor, Database
from mailfathom.store.group_commit import GroupCommit


class Counted:
    """The database's transactions, counted."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.count = 0

    def transaction(self) -> AbstractContextManager[Cursor]:
        @contextmanager
        def counted() -> Iterator[Cursor]:
            self.count += 1
            with self.db.transaction() as cur:
                yield cur

        return counted()


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    store = open_store(database_url)
    store.migrate()
    with store.db.transaction() as cur:
        cur.execute("CREATE TABLE gc_rows (n INTEGER PRIMARY KEY)")
    yield store.db
    store.close()


def _insert(n: int) -> Any:
    def write(cur: Cursor) -> int:
        cur.execute("INSERT INTO gc_rows (n) VALUES (%(n)s)".replace("%(n)s", str(n)))
        return n * 10

    return write


def _rows(db: Database) -> list[int]:
    with db.reading() as cur:
        cur.execute("SELECT n FROM gc_rows ORDER BY n")
        return [row["n"] for row in cur.fetchall()]


def _overlapping(group: GroupCommit, writes: list[Any]) -> list[object]:
    """Run writes[0] in a thread and hold it open until writes[1:] have all queued."""
    held, release = threading.Event(), threading.Event()
    first = writes[0]

    def slow_first(cur: Cursor) -> object:
        held.set()
        release.wait(10)
        return first(cur)

    results: list[object] = [None] * len(writes)

    def call(i: int, write: Any) -> None:
        try:
            results[i] = group.run(write)
        except Exception as exc:  # the test compares what each thread got
            results[i] = exc

    threads = [threading.Thread(target=call, args=(0, slow_first))]
    threads[0].start()
    assert held.wait(10)
    for i, write in enumerate(writes[1:], start=1):
        threads.append(threading.Thread(target=call, args=(i, write)))
        threads[-1].start()
    deadline = time.monotonic() + 10
    while len(group._queue) < len(writes) - 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    release.set()
    for thread in threads:
        thread.join(10)
    return results


def test_overlapping_writes_share_one_commit(db: Database) -> None:
    counted = Counted(db)
    group = GroupCommit(counted.transaction)
    results = _overlapping(group, [_insert(n) for n in range(6)])
    assert results == [0, 10, 20, 30, 40, 50]
    assert _rows(db) == [0, 1, 2, 3, 4, 5]
    assert counted.count == 2, "the five queued writes were not committed together"


def test_a_failing_write_spoils_only_itself(db: Database) -> None:
    counted = Counted(db)
    group = GroupCommit(counted.transaction)

    def bad(cur: Cursor) -> int:
        cur.execute("INSERT INTO gc_rows (n) VALUES (2)")  # taken by the write before it
        return -1

    results = _overlapping(group, [_insert(0), _insert(1), _insert(2), bad, _insert(4)])
    assert results[:3] == [0, 10, 20] and results[4] == 40
    assert isinstance(results[3], Exception)
    assert _rows(db) == [0, 1, 2, 4]
    # the held write; the spoiled batch of four; then each of the four alone
    assert counted.count == 1 + 1 + 4


def test_a_lone_write_is_its_own_transaction(db: Database) -> None:
    counted = Counted(db)
    group = GroupCommit(counted.transaction)
    assert group.run(_insert(7)) == 70
    with pytest.raises(Exception, match=r"(?i)unique|constraint|duplicate"):
        group.run(_insert(7))
    assert _rows(db) == [7]
    assert counted.count == 2
