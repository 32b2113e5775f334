"""Reaping as a worker does it: a claim that returns expired leases and leases nothing.

The store has no reaping call of its own; a worker's claim reaps first (``reap=True``).
:func:`reap` runs such a claim for no job and says how many leases it returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mailfathom.store.sql_store import SqlStore


def reap(
    store: SqlStore, *, now: datetime, owner: str = "", live: Sequence[tuple[int, int]] = ()
) -> int:
    """Return the leases that expired by ``now`` (``owner``'s ``live`` ones excepted), as
    a claim of ``owner`` does before it leases; how many jobs left Claimed."""
    before = store.jobs.count_jobs().get("Claimed", 0)
    store.claims.claim(owner=owner, limit=0, now=now, lease_until=now, live=live)
    return before - store.jobs.count_jobs().get("Claimed", 0)
