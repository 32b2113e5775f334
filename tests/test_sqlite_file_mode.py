"""The SQLite database file and its WAL companions are readable by their owner only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mailfathom import MailFathom


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_sqlite_database_is_created_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask, which would give 0644
    try:
        path = tmp_path / "app.db"
        with MailFathom(f"sqlite:///{path}") as mf:
            mf.migrate()
            mf.enqueue("some.kind", {"secret": "payload"})
            for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                assert file.exists() and _mode(file) == 0o600, (file, oct(_mode(file)))
    finally:
        os.umask(old)


def test_an_existing_database_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.migrate()
    path.chmod(0o640)  # an operator's deliberate choice (a group of readers)
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.jobs.counts()
    assert _mode(path) == 0o640
