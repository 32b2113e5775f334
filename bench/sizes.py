"""How big each workload is: the default run, ``--full`` (20,000 jobs), ``--tiny``."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["DEFAULT", "FULL", "TINY", "Sizes"]


@dataclass(frozen=True)
class Sizes:
    """Every count the harness uses; a preset is a starting point, flags override fields."""

    rounds: int
    """Rounds of every timed workload; each row shows their median and range."""
    jobs: int
    """No-op jobs in the batch-enqueue and processing runs."""
    single_jobs: int
    """Jobs enqueued one per transaction (each commit is a durable write: the slow part)."""
    enqueue_batch: int
    """Jobs per ``enqueue_many`` (or the peer's batch call)."""
    process_budget_s: float
    """Seconds a processing run may take; a system too slow to drain ``jobs`` in that time
    is stopped, its rate is over the jobs it did, and its row says how many."""
    latency_jobs: int
    """Jobs enqueued one by one at ``latency_rate`` while an idle worker waits."""
    latency_rate: float
    """Jobs per second in the latency run: steady and moderate, well below every system's
    capacity here (the slowest peer drains about 100 jobs/s on this machine), so that the
    figure is the wake-up path and not a growing backlog."""
    rss_checkpoint: int
    """Jobs done when the first resident-set reading is taken."""
    rss_jobs: int
    """Jobs the memory run processes in one worker process (read again at the end)."""
    rss_rounds: int
    """The memory run is long and its figure barely moves: usually one round."""
    rss_budget_s: float
    """Seconds a memory run may take; a system too slow for ``rss_jobs`` in that time is
    stopped and reports what it reached (its row says how many jobs)."""
    email_messages: int
    """4 KB messages per email run."""

    def with_rounds(self, rounds: int | None) -> Sizes:
        """This preset with another round count, when one is given."""
        return self if rounds is None else replace(self, rounds=rounds)


DEFAULT = Sizes(
    rounds=3,
    jobs=3_000,
    single_jobs=1_000,
    enqueue_batch=1_000,
    process_budget_s=120.0,
    latency_jobs=400,
    latency_rate=50.0,
    rss_checkpoint=5_000,
    rss_jobs=20_000,
    rss_rounds=1,
    rss_budget_s=90.0,
    email_messages=1_000,
)

FULL = Sizes(
    rounds=5,
    jobs=20_000,
    single_jobs=20_000,
    enqueue_batch=1_000,
    process_budget_s=300.0,
    latency_jobs=1_500,
    latency_rate=50.0,
    rss_checkpoint=50_000,
    rss_jobs=200_000,
    rss_rounds=1,
    rss_budget_s=600.0,
    email_messages=10_000,
)

TINY = Sizes(
    rounds=1,
    jobs=300,
    single_jobs=100,
    enqueue_batch=100,
    process_budget_s=60.0,
    latency_jobs=30,
    latency_rate=200.0,
    rss_checkpoint=200,
    rss_jobs=600,
    rss_rounds=1,
    rss_budget_s=60.0,
    email_messages=50,
)
