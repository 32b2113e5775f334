"""Starting driver processes and speaking the ready/go/result protocol with them."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["ROOT", "DriverError", "DriverProcess", "start_all"]

ROOT = Path(__file__).resolve().parent.parent


class DriverError(RuntimeError):
    """A driver failed, said something unexpected, or took too long."""


class DriverProcess:
    """One driver subprocess: ``python -m bench.drivers.<module> '<spec>'``."""

    def __init__(
        self, python: str, module: str, spec: dict[str, Any], *, profile: Path | None = None
    ) -> None:
        self.module = module
        self.task = spec["task"]
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - lives with the process
        # This checkout's bench and mailfathom, whatever the venv's install points at.
        path = os.pathsep.join([str(ROOT), str(ROOT / "src")])
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
        self._proc = subprocess.Popen(
            [python, "-m", f"bench.drivers.{module}", json.dumps(spec)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._profile = profile
        self._profiler: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The driver's process id."""
        return self._proc.pid

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise DriverError(f"{self}: no {prefix!r} within {timeout:.0f} s{self._tail()}")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self._proc.wait(5)
                raise DriverError(
                    f"{self}: exited with {self._proc.returncode} before {prefix!r}{self._tail()}"
                )
            if line == prefix or line.startswith(prefix + " "):
                return line[len(prefix) :].strip()

    def _tail(self) -> str:
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip()
        return "\n" + "\n".join(text.splitlines()[-15:]) if text else ""

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the driver has done its set-up; attach the profiler if asked."""
        self._next("ready", timeout)
        if self._profile is not None:
            self._profiler = _attach_profiler(self.pid, self._profile)

    def go(self) -> None:
        """Start the timed part."""
        assert self._proc.stdin is not None
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        """The driver's result, once it has finished."""
        payload = self._next("result", timeout)
        self._proc.wait(30)
        if self._profiler is not None:
            self._profiler.wait(60)
        self._close()
        result: dict[str, Any] = json.loads(payload)
        return result

    def kill(self) -> None:
        """Stop the driver now if it still runs (after a failure, or as a last resort)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)
        if self._profiler is not None and self._profiler.poll() is None:
            self._profiler.kill()
            self._profiler.wait(10)
        self._close()

    def _close(self) -> None:
        self._reader.join(10)  # the process has exited: its stdout is at its end
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self._stderr.close()

    def __str__(self) -> str:
        return f"driver {self.module} ({self.task}, pid {self.pid})"


def _attach_profiler(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy, sampling ``pid`` (idle time included: waiting on the database counts)."""
    py_spy = ROOT / "bench" / ".peers" / "venv" / "bin" / "py-spy"
    output.parent.mkdir(parents=True, exist_ok=True)
    profiler = subprocess.Popen(
        [
            str(py_spy),
            "record",
            "--pid",
            str(pid),
            "--rate",
            "500",
            "--idle",
            "--format",
            "raw",
            "--output",
            str(output.with_suffix(f".{pid}.txt")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # py-spy attaches before the clock starts
    return profiler


def start_all(
    python: str,
    module: str,
    specs: Sequence[dict[str, Any]],
    *,
    profile: Path | None = None,
) -> list[DriverProcess]:
    """Start one driver per spec and wait until every one is ready."""
    drivers = [DriverProcess(python, module, spec, profile=profile) for spec in specs]
    try:
        for driver in drivers:
            driver.wait_ready()
    except BaseException:
        for driver in drivers:
            driver.kill()
        raise
    return drivers
