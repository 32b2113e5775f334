"""SMTP sessions, several in parallel, kept for reuse: one connection carries many
messages (RSET between).

Internal. A worker thread takes a session, runs one mail transaction and gives it
back if it is still good. At most ``sessions`` are open at once (out or idle): a
thread beyond that waits until one is given back (a relay's per-client connection
limit). A session idle for longer than ``idle_limit`` is closed rather than reused
(servers drop idle clients after a few minutes); one whose last transaction stopped
before the server's final answer is RSET first, and one idle for longer than
``check_after`` too (RSET then proves the server still listens); sessions never
cross a fork.
"""

from __future__ import annotations

import os
import threading
import time

from mailfathom.delivery.smtp import SmtpSession
from mailfathom.delivery.smtp_url import SmtpTarget

__all__ = ["SessionPool"]


class SessionPool:
    """Open sessions to one SMTP server, shared by a process's delivery threads."""

    def __init__(
        self,
        target: SmtpTarget,
        *,
        timeout: float,
        data_timeout: float,
        idle_limit: float = 30.0,
        check_after: float = 1.0,
        sessions: int = 16,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.data_timeout = data_timeout
        self.idle_limit = idle_limit
        self.check_after = check_after
        self.sessions = sessions
        self._slots = threading.BoundedSemaphore(sessions)
        self._idle: list[tuple[float, SmtpSession]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def acquire(self) -> SmtpSession:
        """A ready session: a reused one after a successful RSET, else a new one; waits
        while ``sessions`` are out. Give it back with :meth:`release`.

        Opening a new one raises :class:`~mailfathom.delivery.smtp.SessionFailure`.
        """
        self._slots.acquire()
        try:
            while (taken := self._take()) is not None:
                idle, session = taken
                if (not session.needs_reset and idle <= self.check_after) or session.reset():
                    session.reused = True
                    return session
            return self._new()
        except BaseException:
            self._slots.release()
            raise

    def open(self) -> SmtpSession:
        """A new session, never one from the pool (waits for a free one, like :meth:`acquire`)."""
        self._slots.acquire()
        try:
            return self._new()
        except BaseException:
            self._slots.release()
            raise

    def _new(self) -> SmtpSession:
        return SmtpSession.open(self.target, timeout=self.timeout, data_timeout=self.data_timeout)

    def release(self, session: SmtpSession) -> None:
        """Give ``session`` back: kept for the next message if it is still good, else
        closed; either way its place is free for another."""
        try:
            if not session.usable or os.getpid() != self._pid:
                return
            with self._lock:
                self._idle.append((time.monotonic(), session))
        finally:
            self._slots.release()

    def close(self) -> None:
        """QUIT every idle session."""
        with self._lock:
            idle, self._idle = self._idle, []
        if os.getpid() == self._pid:
            for _, session in idle:
                session.close()

    def _take(self) -> tuple[float, SmtpSession] | None:
        """The most recently used session still young enough, with its idle seconds."""
        stale: list[SmtpSession] = []
        found = None
        with self._lock:
            if os.getpid() != self._pid:  # forked: the parent's sockets are not ours
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                since, session = self._idle.pop()
                idle = time.monotonic() - since
                if idle <= self.idle_limit:
                    found = (idle, session)
                    break
                stale.append(session)
        for session in stale:
            session.close()
        return found
