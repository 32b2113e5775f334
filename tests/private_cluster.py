"""A private, throw-away PostgreSQL cluster that tests may stop and restart.

The shared server on 5432 serves every other test, so outage tests never touch
it: they ``initdb`` a cluster of their own into a temporary directory (as the
``postgres`` user when running as root), on a free loopback port, and remove it
afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pytest

__all__ = ["PrivateCluster", "cluster_problem", "fresh_database", "private_cluster"]


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def cluster_problem() -> str | None:
    """Why a private cluster cannot be made here, or None when it can."""
    if _bindir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) are installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: cannot start PostgreSQL as its own user"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateCluster:
    """One PostgreSQL cluster in a temporary directory, on its own port."""

    def __init__(self) -> None:
        bindir = _bindir()
        assert bindir is not None, cluster_problem()
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="mailfathom-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-sync", "--no-instructions", "-E", "UTF8")  # fmt: skip

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c max_connections=60 -c fsync=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", options, *extra, action)  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("start")
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        """Shut down: ``fast`` terminates every session (committed data stays);
        ``immediate`` is a crash, as when the server's machine loses power."""
        self._pg_ctl("stop", "-m", mode)

    def restart(self) -> None:
        """Fast restart, as ``pg_ctlcluster ... restart`` does."""
        self._pg_ctl("restart", "-m", "fast")
        self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until a connection succeeds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def remove(self) -> None:
        """Stop the server if it runs, and delete the cluster."""
        with contextlib.suppress(RuntimeError):  # already stopped
            self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def private_cluster() -> PrivateCluster:
    """A started cluster; skips (locally) or fails (``CI=true``) when none can be made."""
    problem = cluster_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI requires a private PostgreSQL cluster: {problem}")
        pytest.skip(problem)
    made = PrivateCluster()
    made.start()
    return made


def fresh_database(cluster: PrivateCluster, *, connect_timeout: int = 2) -> str:
    """The URL of a new, empty database on ``cluster``."""
    cluster.wait_ready()
    name = f"mf_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return cluster.url.rsplit("/", 1)[0] + f"/{name}?connect_timeout={connect_timeout}"
