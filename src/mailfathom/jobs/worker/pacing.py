"""Claim pacing: when a worker claims, how many jobs, and how long its loop sleeps.

Internal, the producer's (:class:`~mailfathom.jobs.worker.producer.Producer`). Pure
decisions on numbers the producer passes in (instants are ``time.monotonic()`` seconds), so each
rule is testable alone:

- claim for the free slots plus what :class:`~mailfathom.jobs.worker.claim_ahead.ReadyJobs`
  sizes ahead; when the last claim came back full (more is probably due) claim at
  most every ``CLAIM_COOLDOWN`` seconds unless half the capacity is free, so claims
  stay batched; when it came back short, claim again after ``poll_interval`` or
  when woken (a new job, a schedule firing);
- when a claim came back short because flow-control limits held due jobs back, claim
  again after ``FLOW_RETRY`` seconds (a slot may free on another machine, unannounced);
- record finished attempts on their own when no claim will carry them soon;
- return expired leases to the queue at most every ``REAP_INTERVAL`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from mailfathom.jobs.worker.claim_ahead import ReadyJobs

__all__ = ["CLAIM_COOLDOWN", "FLOW_RETRY", "REAP_INTERVAL", "ClaimPacer", "Load"]

#: s between two claims under load, unless half the capacity is free.
CLAIM_COOLDOWN = 0.01
#: s between two claims that also return expired leases to the queue: a lease runs for
#: tens of seconds, so reaping on every claim (several a millisecond under load) buys
#: nothing and costs a statement each time.
REAP_INTERVAL = 1.0
#: s after a claim that limits held back before the next try.
FLOW_RETRY = 0.05


@dataclass(frozen=True, slots=True)
class Load:
    """What the worker holds at one instant."""

    running: int
    ready: int  # claimed ahead, not started
    unrecorded: int  # finished, outcome not recorded yet
    unrecorded_age: float  # s the oldest of those has waited


class ClaimPacer:
    """The claim and sleep decisions of one worker with ``concurrency`` slots."""

    def __init__(self, concurrency: int, poll_interval: float, ready: ReadyJobs) -> None:
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self._ready = ready
        #: Set when jobs may have arrived (a wake-up from the database, a schedule fired).
        self.woken = False
        self._last_claim = float("-inf")
        self._last_claim_full = False
        self._next_reap = 0.0  # the first claim reaps
        self._flow_retry: float | None = None  # when limits held jobs back: try again then

    def capacity(self) -> int:
        """Slots plus how many to claim ahead of them (a stopping worker claims nothing)."""
        return self.concurrency + self._ready.extra()

    def wanted(self, now: float, load: Load, *, burst: bool = False) -> int:
        """How many jobs to claim now (0: do not claim now)."""
        capacity = self.capacity()
        wanted = capacity - load.running - load.ready
        if wanted <= 0:
            return 0
        since = now - self._last_claim
        if self._last_claim_full:  # more is probably due: batch the claims a little
            due = wanted * 2 >= capacity or since >= CLAIM_COOLDOWN
        else:
            retry = self._flow_retry
            due = burst or self.woken or since >= self.poll_interval
            due = due or (retry is not None and now >= retry)
        return wanted if due else 0

    def reap_due(self, now: float) -> bool:
        """Whether the next claim also returns expired leases to the queue."""
        return now >= self._next_reap

    def claimed(
        self, now: float, wanted: int, got: int, *, reaped: bool, held_back: bool = False
    ) -> None:
        """A claim for ``wanted`` jobs made at ``now`` leased ``got`` (``held_back``:
        flow-control limits left due jobs unclaimed)."""
        self.woken = False
        self._last_claim = now
        self._last_claim_full = got == wanted
        self._flow_retry = now + FLOW_RETRY if held_back and got < wanted else None
        if reaped:
            self._next_reap = now + REAP_INTERVAL

    def should_flush(self, now: float, load: Load) -> bool:
        """Record outcomes on their own when no claim carries them soon enough."""
        if not load.unrecorded:
            return False
        if not self._last_claim_full:
            return True  # the queue looked empty: record now, nothing to batch with
        capacity = self.capacity()  # what the next claim will carry
        return load.unrecorded * 2 >= capacity or load.unrecorded_age >= CLAIM_COOLDOWN

    def wait_time(
        self,
        now: float,
        load: Load,
        *,
        not_before: float | None = None,
        wake_by: float | None = None,
    ) -> float:
        """Seconds the loop may sleep (a completion or a wake-up cuts it short): not
        before ``not_before`` for its own sake (the database is left alone until then),
        and ``wake_by`` at the latest (a timeout, the next schedule, a late job)."""
        since = now - self._last_claim
        if load.running >= self.concurrency:
            wait = self.poll_interval  # a completion wakes the loop
        elif self._last_claim_full:
            wait = CLAIM_COOLDOWN - since
        else:
            wait = self.poll_interval - since
            if self._flow_retry is not None:
                wait = min(wait, self._flow_retry - now)
        if load.unrecorded:
            wait = min(wait, CLAIM_COOLDOWN)
        if not_before is not None:
            wait = max(wait, not_before - now)
        if wake_by is not None:
            wait = min(wait, wake_by - now)
        return min(max(wait, 0.001), self.poll_interval)
