"""The SQLite database as a file: made private, watched for replacement, copied for backup,
and its disk failures explained.

Internal. :class:`SQLiteDatabase` keeps connections and transactions; this module
knows about the file under them.

* **Replacement.** A process keeps writing to the file it opened even after that
  file was deleted, or another was moved or copied to its path: every write it
  acknowledges then goes to a file nobody will open again. :class:`FileIdentity`
  remembers the device and inode first opened and is checked before each commit
  (one ``stat``, a microsecond against the commit's own fsync).
* **Backup.** :func:`backup` copies a consistent snapshot with SQLite's online
  backup API while workers go on writing.
* **Disk failures.** SQLite reports a write refused by the file-size limit
  (``ulimit -f``, ``EFBIG``) as "disk I/O error"; :func:`io_error_hint` says what
  it really was.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3

from mailfathom.errors import ConfigurationError, InvalidInput, StoreError

__all__ = ["FileIdentity", "backup", "create_private", "io_error_hint", "needs_reopen"]

#: SQLite's primary result codes after which a connection is closed and opened again:
#: SQLITE_READONLY (a connection opened while the file was read-only stays read-only
#: forever), SQLITE_IOERR and SQLITE_CANTOPEN.
_REOPEN_CODES = frozenset({8, 10, 14})

RESTORE_ADVICE = 'restore a backup as docs/operations.md says ("Backup and restore")'


def needs_reopen(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` may have left its connection unusable for good (read-only since it
    was opened, or its file handle broken), so the next call should open a new one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _REOPEN_CODES


def create_private(path: str) -> None:
    """Create the database file readable by its owner only (0600), if it does not exist.

    It holds payloads, message bytes and the console's session key. SQLite gives the
    ``-wal`` and ``-shm`` files the database file's permissions, so they are private too.
    An existing file keeps the permissions it has. A missing file beside a leftover
    ``-wal`` is refused: the database was deleted or moved, and a new file would be
    read with another database's log.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create the SQLite database {path!r} ({exc.strerror}): check the folder's "
            "permissions or choose another path"
        ) from None
    os.close(fd)
    wal = f"{path}-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise StoreError(
            f"the SQLite database {path!r} is missing but its write-ahead log {wal!r} is "
            f"there: the database was deleted or moved while in use. Put it back, or "
            f"{RESTORE_ADVICE}; to start an empty database instead, remove the -wal and -shm "
            "files first"
        )


class FileIdentity:
    """The device and inode of the file a database's connections opened."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None

    def opened(self) -> None:
        """A connection was just opened: remember the file the first time, else check
        that it is still the same file (a new connection must not quietly move to a
        replacement)."""
        if self._identity is None:
            try:
                found = os.stat(self.path)
            except OSError as exc:
                raise self._gone() from exc
            self._identity = (found.st_dev, found.st_ino)
            return
        self.check()

    def check(self) -> None:
        """Raise :class:`StoreError` when the path no longer names the file opened."""
        if self._identity is None:
            return
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            raise self._gone() from None
        if (found.st_dev, found.st_ino) != self._identity:
            raise self._gone()

    def _gone(self) -> StoreError:
        return StoreError(
            f"the SQLite database {self.path!r} was deleted or replaced while this process "
            "had it open: nothing was written. Stop every process that uses it (their "
            "writes would go to a file nobody reads), then put the file back or "
            f"{RESTORE_ADVICE}"
        )


def backup(connection: sqlite3.Connection, source: str, target: str) -> None:
    """Copy the database ``connection`` is open on to a new file ``target`` (0600),
    consistent as of one moment, with SQLite's online backup API: writers go on
    meanwhile. The copy is checked (``PRAGMA quick_check``) and synced before it counts."""
    target = os.path.abspath(target)
    if os.path.realpath(target) == os.path.realpath(source):
        raise InvalidInput(f"{target!r} is the database itself: choose another path")
    if os.path.lexists(target):
        raise InvalidInput(f"{target!r} exists: choose a new path (nothing is overwritten)")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise InvalidInput(f"{folder!r} does not exist: create it or choose another path")
    create_private(target)
    try:
        with contextlib.closing(sqlite3.connect(target, isolation_level=None)) as copy:
            copy.execute("PRAGMA synchronous = FULL")
            connection.backup(copy)
            verdict = copy.execute("PRAGMA quick_check").fetchall()
            if [tuple(row) for row in verdict] != [("ok",)]:
                raise StoreError(f"the copy in {target!r} failed its check: {verdict}")
            copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    except BaseException as exc:
        for leftover in (target, f"{target}-journal", f"{target}-wal", f"{target}-shm"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"the backup to {target!r} failed ({exc}): nothing kept") from exc
        raise
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def io_error_hint(path: str) -> str | None:
    """What a "disk I/O error" on ``path`` most likely was, when the process's file-size
    limit explains it (a file of the database within a megabyte of ``ulimit -f``)."""
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit == resource.RLIM_INFINITY:
        return None
    for name in (path, f"{path}-wal", f"{path}-journal"):
        with contextlib.suppress(OSError):
            size = os.path.getsize(name)
            if size + 1_048_576 >= limit:
                return (
                    f"the file-size limit of this process ({limit} bytes, `ulimit -f`) stops "
                    f"{name!r} ({size} bytes) from growing: nothing was written; raise the "
                    "limit for the process (ulimit -f, systemd LimitFSIZE=) and retry"
                )
    return None
