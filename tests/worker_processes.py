"""Start real ``mailfathom worker`` processes for crash tests, and wait on what they do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def start_worker(
    database_url: str,
    log: Path,
    *options: str,
    app: str = "worker_app:mf",
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``mailfathom worker --app <app> --database <url> <options>``, logging to ``log``."""
    environ = {**os.environ, **(env or {})}
    environ.pop("MAILFATHOM_DATABASE_URL", None)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environ.get("PYTHONPATH")]))
    command = [
        sys.executable,
        "-c",
        "from mailfathom.cli import main; main()",
        "worker",
        "--app",
        app,
        "--database",
        database_url,
        *options,
    ]
    with log.open("ab") as out:
        return subprocess.Popen(command, env=environ, cwd=TESTS, stdout=out, stderr=out)


def wait_for(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    log: Path | None = None,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    """Wait until ``check`` holds (a file another process writes, a row it commits);
    fail with the worker's log when it never does, or at once when ``process`` exits."""
    deadline = time.monotonic() + timeout
    while not check():
        status = process.poll() if process is not None else None
        if status is not None and not check():
            raise AssertionError(
                f"the worker exited with {status} before {what}\n--- worker log ---\n{_read(log)}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n--- worker log ---\n{_read(log)}")
        time.sleep(0.02)


def _read(log: Path | None) -> str:
    return log.read_text(errors="replace") if log is not None and log.exists() else ""


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> int:
    """SIGTERM ``process`` if it still runs, and return its exit status (SIGKILL if stuck)."""
    if process.poll() is None:
        process.terminate()
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``mailfathom <args>`` to its end from the tests folder; output is captured."""
    environ = dict(os.environ)
    environ.pop("MAILFATHOM_DATABASE_URL", None)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", "from mailfathom.cli import main; main()", *args],
        env=environ,
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Readiness:
    """A service manager's notify socket (``NOTIFY_SOCKET``) that workers report to:
    ``READY=1`` once a worker works, ``STOPPING=1`` when it begins to stop. A thread
    reads it all the time, as a service manager does (a worker never waits to send)."""

    def __init__(self) -> None:
        self.name = f"@mailfathom-test-{uuid.uuid4().hex}"  # abstract: no file, no length limit
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind("\0" + self.name[1:])
        self._socket.settimeout(0.2)
        self._seen: dict[int, set[str]] = {}
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="notify-socket", daemon=True)
        self._reader.start()

    def env(self) -> dict[str, str]:
        """The environment entry that points a worker at this socket."""
        return {"NOTIFY_SOCKET": self.name}

    def states(self, pid: int) -> set[str]:
        """What process ``pid`` has reported so far (``READY=1``, ``STOPPING=1``)."""
        with self._changed:
            return set(self._seen.get(pid, set()))

    def wait(
        self,
        process: subprocess.Popen[bytes],
        state: str = "READY=1",
        timeout: float = 60,
        log: Path | None = None,
    ) -> None:
        """Wait until ``process`` reports ``state``; fail if it exits or never does."""
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        with self._changed:
            while state not in self._seen.get(process.pid, set()):
                if exited_at is None and process.poll() is not None:
                    exited_at = time.monotonic()  # what it sent may still be on its way
                if exited_at is not None and time.monotonic() > exited_at + 1:
                    raise AssertionError(
                        f"the worker exited with {process.returncode} before {state}\n"
                        f"--- worker log ---\n{_read(log)}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"timed out waiting for {state}\n--- worker log ---\n{_read(log)}"
                    )
                self._changed.wait(0.2)

    def close(self) -> None:
        """Stop reading and close the socket."""
        self._closed = True
        self._reader.join(5)
        self._socket.close()

    def _read(self) -> None:
        while not self._closed:
            try:
                message = self._socket.recv(4096).decode()
            except TimeoutError:
                continue
            fields = dict(line.partition("=")[::2] for line in message.splitlines())
            pid = int(fields.get("MAINPID", "0"))
            with self._changed:
                self._seen.setdefault(pid, set()).update(
                    f"{key}={value}" for key, value in fields.items() if key != "MAINPID"
                )
                self._changed.notify_all()
