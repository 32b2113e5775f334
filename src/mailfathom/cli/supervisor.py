"""``mailfathom worker --processes N``: one supervisor, N worker processes, one shutdown.

Internal. A worker process runs its handlers on one interpreter, so it uses about
one core; ``--processes N`` starts N ordinary ``mailfathom worker`` processes (the
same options, each with its own ``--concurrency``) that share the work through the
database, exactly as N workers started by hand would, and supervises them:

- **One shutdown.** The first SIGTERM/SIGINT to the supervisor is passed on to every
  worker, which stops gracefully (no new claims, running jobs get their
  ``--shutdown-timeout``); the supervisor exits once all have. A second signal is
  passed on too, so every worker exits at once. The workers run in their own
  process group, so a terminal's Ctrl-C reaches them only through the supervisor
  (once, not twice). On Linux a worker whose supervisor is killed outright gets
  SIGTERM and stops gracefully on its own.
- **A worker that dies is restarted.** One that exits while the supervisor is not
  stopping (a crash, an ``os._exit`` in a handler, the OOM killer) is logged with its
  exit status and started again, after a pause that doubles (1 s up to 30 s) while
  restarts come less than 10 s apart. Its jobs return when their leases expire, as
  for any dead worker. With ``--burst`` nothing is restarted: each worker drains what
  is due and exits, and the supervisor exits when all have.

The supervisor exits 0 when every worker did; otherwise with the first non-zero
status a worker reported while it was stopping (or while draining, in a burst).

Secrets never reach a worker's command line (``/proc/<pid>/cmdline`` is readable by
every local user): the database URL travels in the workers' environment
(``MAILFATHOM_DATABASE_URL``), readable by their owner alone. Each worker starts with
SIGTERM and SIGINT blocked until it has installed its own handlers, so a stop that
comes while it is still starting is honoured rather than killing it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from mailfathom.jobs import signals
from mailfathom.jobs.worker import readiness
from mailfathom.observability.logs import log_fields
from mailfathom.redact import redact

__all__ = ["Supervisor", "spawn"]

logger = logging.getLogger(__name__)

_FIRST_PAUSE = 1.0  # seconds before restarting a worker that died
_LONGEST_PAUSE = 30.0
_STEADY = 10.0  # a worker that lived this long resets the pause
_PR_SET_PDEATHSIG = 1


@dataclass(eq=False)
class _Slot:
    """One of the N places a worker process runs in."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    pause: float = 0.0
    restart_at: float | None = None
    status: int | None = None


class Supervisor:
    """Runs ``count`` copies of the worker command ``args`` (``mailfathom worker`` options,
    without ``--processes``) until stopped; see the module docstring.

    ``environ`` is the workers' environment: where secrets such as the database URL go,
    since ``args`` are visible to every local user. ``command`` is how a framework
    integration starts one of its worker commands (``flask mailfathom worker``); by
    default ``mailfathom worker``. ``args`` that carry ``--database``
    or anything with a password in it are refused."""

    def __init__(
        self,
        args: Sequence[str],
        count: int,
        *,
        burst: bool,
        environ: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        if any(arg.startswith("--database") or redact(arg) != arg for arg in args):
            raise ValueError("secrets such as the database URL go in environ, never in args")
        self._environ = dict(os.environ if environ is None else environ)
        worker = command or [sys.executable, "-c", "from mailfathom.cli import main; main()"]
        self._command = [*worker, *([] if command else ["worker"]), *args]
        self._slots = [_Slot(number) for number in range(count)]
        self._burst = burst
        self._wake = threading.Event()
        self._stopping = 0  # signals received
        self._passed_on = 0  # signals passed on to the workers
        self._last_signal: int = signal.SIGTERM

    def run(self) -> int:
        """Start the workers, supervise them until they have all exited; the exit status."""
        previous = {
            signum: signal.signal(signum, self._signalled)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        previous_child = signal.signal(signal.SIGCHLD, lambda *_: self._wake.set())
        for signum in signals.take_held():  # a stop that came while the command started
            self._signalled(signum, None)
        try:
            for slot in self._slots if not self._stopping else ():
                self._start(slot)
            readiness.notify("READY=1")
            logger.info(
                "supervisor pid=%d started %d worker processes: %s",
                os.getpid(),
                len(self._slots),
                ", ".join(str(s.process.pid) for s in self._slots if s.process is not None),
                extra=log_fields(
                    "supervisor_started",
                    pid=os.getpid(),
                    processes=[s.process.pid for s in self._slots if s.process is not None],
                ),
            )
            self._supervise()
        finally:
            signal.signal(signal.SIGCHLD, previous_child)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        statuses = [slot.status for slot in self._slots if slot.status]
        logger.info(
            "supervisor pid=%d: every worker process has exited",
            os.getpid(),
            extra=log_fields("supervisor_stopped", pid=os.getpid(), statuses=statuses),
        )
        return statuses[0] if statuses else 0

    def _supervise(self) -> None:
        while True:
            self._wake.clear()
            self._pass_on_signals()
            now = time.monotonic()
            live = 0
            for slot in self._slots:
                if slot.process is not None and slot.process.poll() is not None:
                    self._ended(slot, now)
                due = slot.restart_at is not None and now >= slot.restart_at
                if slot.process is None and due and not self._stopping:
                    self._start(slot)
                if slot.process is not None:
                    live += 1
            waiting = [s.restart_at for s in self._slots if s.restart_at is not None]
            if live == 0 and (self._stopping or not waiting):
                return
            timeout = 0.5
            if waiting and not self._stopping:
                timeout = min(timeout, max(min(waiting) - now, 0.0))
            self._wake.wait(timeout)

    def _start(self, slot: _Slot) -> None:
        slot.restart_at = None
        slot.started = time.monotonic()
        slot.process = spawn(self._command, self._environ)

    def _ended(self, slot: _Slot, now: float) -> None:
        assert slot.process is not None
        status, pid = slot.process.returncode, slot.process.pid
        slot.process = None
        if self._stopping or (self._burst and status == 0):
            if status != 0:
                logger.warning(
                    "worker process pid=%d exited with status %s",
                    pid,
                    status,
                    extra=log_fields("worker_process_exited", pid=pid, status=status),
                )
                slot.status = slot.status or _exit_status(status)
            return
        if self._burst:
            logger.error(
                "worker process pid=%d exited with status %s; not restarted (--burst)",
                pid,
                _describe(status),
                extra=log_fields("worker_process_exited", pid=pid, status=status, burst=True),
            )
            slot.status = slot.status or _exit_status(status)
            return
        lived = now - slot.started
        slot.pause = (
            _FIRST_PAUSE
            if lived >= _STEADY
            else min(max(slot.pause * 2, _FIRST_PAUSE), _LONGEST_PAUSE)
        )
        slot.restart_at = now + slot.pause
        logger.error(
            "worker process pid=%d exited with status %s after %.1fs; restarting it in %gs "
            "(its jobs return when their leases expire)",
            pid,
            _describe(status),
            lived,
            slot.pause,
            extra=log_fields("restart_worker", pid=pid, status=status, pause=slot.pause),
        )

    def _signalled(self, signum: int, frame: FrameType | None) -> None:
        self._stopping += 1
        self._last_signal = signum
        self._wake.set()

    def _pass_on_signals(self) -> None:
        while self._passed_on < min(self._stopping, 2):
            self._passed_on += 1
            name = signal.Signals(self._last_signal).name
            if self._passed_on == 1:
                readiness.notify("STOPPING=1")
                logger.warning(
                    "supervisor %s received: stopping %d worker process(es) gracefully; send "
                    "it again to make them exit at once",
                    name,
                    sum(1 for s in self._slots if s.process is not None),
                    extra=log_fields("supervisor_signal", signal=name, graceful=True),
                )
            else:
                logger.warning(
                    "supervisor %s received again: worker processes exit at once",
                    name,
                    extra=log_fields("supervisor_signal", signal=name, graceful=False),
                )
            for slot in self._slots:
                slot.restart_at = None
                if slot.process is not None and slot.process.poll() is None:
                    slot.process.send_signal(signal.SIGTERM)


def spawn(
    command: Sequence[str], environ: Mapping[str, str], **popen: Any
) -> subprocess.Popen[bytes]:
    """Start one worker process as the supervisor does (``popen``: more ``Popen`` options,
    such as where its output goes): in a session of its own, stopped by a SIGTERM when
    the supervisor dies, and with SIGTERM/SIGINT blocked until its handlers are in."""
    return subprocess.Popen(
        command,
        env=dict(environ),
        start_new_session=True,  # a terminal's Ctrl-C reaches them only through us
        preexec_fn=_prepare_child,  # noqa: PLW1509 (the supervisor runs no threads)
        **popen,
    )


def _prepare_child() -> None:
    """In the child, before exec: block SIGTERM/SIGINT (the worker unblocks them once its
    handlers are in place: a stop sent while it starts waits for them), and SIGTERM the
    worker when its supervisor dies (Linux)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signals.STOP_SIGNALS)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _describe(status: int) -> str:
    if status < 0:
        return f"{status} (killed by {signal.Signals(-status).name})"
    return str(status)


def _exit_status(status: int) -> int:
    return 128 - status if status < 0 else status
