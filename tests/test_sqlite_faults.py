"""SQLite under a broken disk: permissions that change, a file deleted or replaced under
running processes, a file-size limit, a lock held too long; and backup and restore.

Permissions are tested in a process of another user (``nobody``, through ``setpriv``)
when the suite runs as root, who ignores them.
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mailfathom
from mailfathom import JobState, MailFathom, StoreError
from mailfathom.cli import run as cli_run
from mailfathom.errors import ConfigurationError
from worker_processes import TESTS

CHILD = TESTS / "sqlite_fault_child.py"


class Child:
    """``sqlite_fault_child.py`` on a database file: one enqueue per :meth:`enqueue`."""

    def __init__(self, command: list[str], *, code: Path = TESTS, **popen: object) -> None:
        """``code``: where the child imports ``mailfathom`` and this module from first
        (the code under test, which may not be the installed one)."""
        path = [str(code), str(TESTS), os.environ.get("PYTHONPATH", "")]
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environ,
            **popen,  # type: ignore[call-overload]
        )

    def enqueue(self, size: int = 0) -> str:
        """Ask for one enqueue of a ``size``-character payload; its answer line."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{size}\n")
        self.process.stdin.flush()
        answer: str = self.process.stdout.readline()
        assert answer, f"the child died: {self.process.stdout.read()}"
        return answer.strip()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder another user may use (pytest's own temporary folders are root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="mailfathom-faults-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _code_in(folder: Path) -> Path:
    """A copy of the code under test (the ``mailfathom`` package imported here, and the
    child's script) in ``folder``, where another user can read it."""
    code = folder / "code"
    package = Path(mailfathom.__file__).parent
    shutil.copytree(package, code / "mailfathom", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(CHILD, code / CHILD.name)
    for path in [code, *code.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return code


def _as_nobody(folder: Path) -> list[str]:
    """The command prefix that runs a process as ``nobody`` when we are root (who
    ignores permissions), after giving ``folder`` to that user; else nothing."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot run a process as another user")
    for path in [folder, *folder.glob("*.db*")]:
        os.chown(path, 65534, 65534)
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _files(path: Path) -> list[Path]:
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


def test_a_connection_opened_read_only_recovers_once_permissions_are_back(
    shared_folder: Path,
) -> None:
    path = shared_folder / "app.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.migrate()
    code = _code_in(shared_folder)
    prefix = _as_nobody(shared_folder)
    path.chmod(0o444)
    script = str(code / CHILD.name)
    child = Child([*prefix, sys.executable, script, str(path)], code=code, cwd=shared_folder)
    try:
        refused = child.enqueue()
        assert refused.startswith("fail") and "read-only" in refused, refused
        assert "permissions" in refused
        for file in _files(path):  # -shm was made read-only like the file: restore it too
            file.chmod(0o644)
        answer = child.enqueue()
        assert answer.startswith("ok "), answer  # the same process, without a restart
        assert child.enqueue().startswith("ok ")
    finally:
        child.close()
    with MailFathom(f"sqlite:///{path}") as mf:
        assert mf.jobs.counts()[JobState.PENDING] == 2


def _counts(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM mf_jobs").fetchone()[0])


def test_a_replaced_file_stops_every_write_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with MailFathom(f"sqlite:///{path}") as mf, MailFathom(f"sqlite:///{path}") as other:
        mf.migrate()
        kept = mf.enqueue("a.kind", {"n": 1})
        other.jobs.counts()  # the second process has its connection open too
        copy = tmp_path / "copy.db"
        mf.store.backup(str(copy))
        os.replace(copy, path)  # an operator "restores" under running processes
        for app in (mf, other):
            with pytest.raises(StoreError, match="deleted or replaced") as caught:
                app.enqueue("a.kind", {"n": 2})
            assert "Stop every process" in str(caught.value)
            assert "docs/operations.md" in str(caught.value)
            with pytest.raises(StoreError, match="deleted or replaced"):
                app.enqueue_many("a.kind", [{"n": 3}, {"n": 4}])
    assert _counts(path) == 1  # the restored copy has the one job acknowledged before
    with MailFathom(f"sqlite:///{path}") as fresh:  # a new process uses the new file
        assert fresh.jobs.get(kept.id).payload == {"n": 1}
        fresh.enqueue("a.kind", {"n": 5})


def test_a_deleted_file_stops_writes_and_is_not_recreated_beside_its_log(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.migrate()
        mf.enqueue("a.kind", {})
        wal = Path(f"{path}-wal")
        assert wal.stat().st_size > 0
        path.unlink()
        with pytest.raises(StoreError, match="deleted or replaced"):
            mf.enqueue("a.kind", {})
        # the next process must not make an empty database beside the old log
        with (
            pytest.raises(StoreError, match="write-ahead log") as caught,
            MailFathom(f"sqlite:///{path}") as late,
        ):
            late.migrate()
        assert "remove the -wal and -shm" in str(caught.value)
        assert not path.exists()


def test_backup_and_the_documented_restore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, copy = tmp_path / "app.db", tmp_path / "backups" / "app-1.db"
    url = f"sqlite:///{path}"
    with MailFathom(url) as mf:
        mf.migrate()
        before = mf.enqueue("a.kind", {"n": 1})
        copy.parent.mkdir()
        assert cli_run(["--database", url, "backup", str(copy)]) == 0
        assert f"backed up to {copy}" in capsys.readouterr().out
        assert oct(copy.stat().st_mode & 0o777) == "0o600"
        after = mf.enqueue("a.kind", {"n": 2})
        assert cli_run(["--database", url, "backup", str(copy)]) == 2  # never overwrites
        assert "exists" in capsys.readouterr().err
    # the restore procedure of docs/operations.md: every process stopped, then
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copy2(copy, path)
    assert cli_run(["--database", url, "migrate"]) == 0
    assert cli_run(["--database", url, "health"]) == 0, capsys.readouterr()
    with MailFathom(url) as mf:
        assert mf.jobs.get(before.id).payload == {"n": 1}
        assert [job.id for job in mf.jobs.list()] == [before.id]  # later work is not in it
        assert mf.enqueue("a.kind", {"n": 3}).id > before.id
    assert after.id > before.id


def test_backup_of_postgresql_points_at_pg_dump() -> None:
    from mailfathom.store.postgres import PostgresDatabase

    with pytest.raises(ConfigurationError, match="pg_dump"):
        PostgresDatabase("postgresql://u:secret@127.0.0.1:1/db").backup("/tmp/x.db")


def test_a_file_size_limit_is_named_not_a_disk_io_error(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.migrate()
    limit = path.stat().st_size + 400_000

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    child = Child([sys.executable, str(CHILD), str(path)], preexec_fn=limited)
    answers: list[str] = []
    try:
        while len(answers) < 40:
            answers.append(child.enqueue(50_000))
            if answers[-1].startswith("fail"):
                break
    finally:
        child.close()
    failed = [answer for answer in answers if answer.startswith("fail")]
    assert failed, answers
    assert "file-size limit" in failed[0] and "ulimit -f" in failed[0], failed[0]
    assert str(limit) in failed[0]


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another connection (as another process would) holding the database's write lock."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_the_busy_timeout_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "app.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        mf.migrate()
    monkeypatch.setenv("MAILFATHOM_SQLITE_BUSY_TIMEOUT", "0.3")
    holder = _hold_write_lock(path)
    try:
        with MailFathom(f"sqlite:///{path}") as mf:
            assert mf.settings.sqlite_busy_timeout == 0.3
            started = time.monotonic()
            with pytest.raises(StoreError, match="locked"):
                mf.enqueue("a.kind", {})
            assert 0.25 <= time.monotonic() - started < 10  # not the default 30 s
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize("bad", [-1, "soon", float("nan"), True, 100_000])
def test_a_bad_busy_timeout_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="sqlite_busy_timeout"):
        MailFathom("sqlite:///x.db", sqlite_busy_timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, "soon", float("inf"), False])
def test_a_bad_enqueue_timeout_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="enqueue_timeout"):
        MailFathom("sqlite:///x.db", enqueue_timeout=bad)  # type: ignore[arg-type]


def test_the_settings_come_from_the_environment_and_toml(
    monkeypatch: pytest.MonkeyPatch, isolated_from_the_caller: Path
) -> None:
    from mailfathom.config import Settings

    (isolated_from_the_caller / "mailfathom.toml").write_text(
        "[mailfathom]\nsqlite_busy_timeout = 2.5\nenqueue_timeout = 4\n"
    )
    assert Settings.load().sqlite_busy_timeout == 2.5
    assert Settings.load().enqueue_timeout == 4
    monkeypatch.setenv("MAILFATHOM_ENQUEUE_TIMEOUT", "0.5")
    assert Settings.load().enqueue_timeout == 0.5
    monkeypatch.setenv("MAILFATHOM_ENQUEUE_TIMEOUT", "later")
    with pytest.raises(ConfigurationError, match="MAILFATHOM_ENQUEUE_TIMEOUT"):
        Settings.load()
