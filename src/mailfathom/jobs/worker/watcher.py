"""Wake-ups: a thread that tells a worker's loop when jobs may have arrived.

Internal, one part of :class:`~mailfathom.jobs.worker.worker.Worker`. It blocks in the
store's ``wait_for_jobs`` (PostgreSQL ``LISTEN``; SQLite's ``data_version``) in
slices of at most ``WATCH_SLICE`` seconds, so that it notices soon when it should
stop, and calls ``on_wake`` when woken. When the database fails it backs off
(0.5 s doubling, up to ``MAX_BACKOFF``); the loop's own polling covers the gap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mailfathom.errors import StoreError
from mailfathom.observability.logs import log_fields
from mailfathom.store.protocol import Store

__all__ = ["MAX_BACKOFF", "WATCH_SLICE", "Watcher"]

logger = logging.getLogger(__name__)

WATCH_SLICE = 0.25  # s: the watcher checks this often whether it should stop
MAX_BACKOFF = 5.0  # s: longest pause between retries while the database fails


class Watcher:
    """Calls ``on_wake`` from a daemon thread each time jobs may have arrived."""

    def __init__(
        self, store: Store, *, name: str, poll_interval: float, on_wake: Callable[[], None]
    ) -> None:
        self._store = store
        self._slice = min(poll_interval, WATCH_SLICE)
        self._on_wake = on_wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self, *, wait: bool) -> None:
        """Stop watching; with ``wait``, until the thread has ended (one slice or so)."""
        self._stop.set()
        if wait and self._thread.is_alive():
            self._thread.join(WATCH_SLICE + 1)

    def _run(self) -> None:
        pause = 0.5
        while not self._stop.is_set():
            try:
                woke = self._store.wait_for_jobs(self._slice)
            except StoreError as exc:
                logger.debug(
                    "waiting for jobs failed (%s); retrying in %.1fs",
                    exc,
                    pause,
                    extra=log_fields("wait_failed", error=str(exc), retry_in=pause),
                )
                self._stop.wait(pause)
                pause = min(pause * 2, MAX_BACKOFF)
                continue
            pause = 0.5
            if woke:
                self._on_wake()
