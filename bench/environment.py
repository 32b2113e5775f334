"""What the bench installs for itself, and the machine it runs on.

- ``bench/.peers/venv``: the peers at pinned versions (``bench/peers-requirements.txt``),
  rebuilt when that file changes. Never the project's venv.
- ``bench/.peers/django-venv``: the Django email peers (django-mailer,
  django-post_office) on the project's Django and psycopg
  (``bench/django-peers-requirements.txt``), rebuilt when that file changes.
- ``bench/.peers/postfix``: Debian's ``postfix`` package unpacked with ``dpkg -x`` for
  its ``smtp-sink``, run as a plain process (no postfix install, no daemon). Libraries
  it needs that the machine lacks are unpacked beside it from their own packages.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

from bench.runner import ROOT

__all__ = [
    "PEERS",
    "SmtpSink",
    "describe_machine",
    "ensure_django_peers_venv",
    "ensure_peers_venv",
    "ensure_smtp_sink",
]

PEERS = ROOT / "bench" / ".peers"
REQUIREMENTS = ROOT / "bench" / "peers-requirements.txt"
DJANGO_REQUIREMENTS = ROOT / "bench" / "django-peers-requirements.txt"
POSTFIX_VERSION = "3.7.11-0+deb12u1"
"""The Debian package pinned for smtp-sink; the archive's current one is used if it is gone."""
_POSTFIX_LIBRARIES = (
    "libdb5.3",
    "libicu72",
    "libnsl2",
    "libsasl2-2",
    "libssl3",
    "libtirpc3",
    "libgssapi-krb5-2",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libkeyutils1",
)


def _run(command: list[str], *, cwd: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def _ensure_venv(venv: Path, requirements: Path, what: str) -> str:
    python = venv / "bin" / "python"
    marker = venv / ".requirements-sha256"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return str(python)
    print(f"installing {what} pinned environment into {venv} ...", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)])
    marker.write_text(wanted)
    return str(python)


def ensure_peers_venv() -> str:
    """Create (or reuse) the peers' virtual environment; returns its python."""
    return _ensure_venv(PEERS / "venv", REQUIREMENTS, "the peers'")


def ensure_django_peers_venv() -> str:
    """Create (or reuse) the Django email peers' virtual environment; returns its python."""
    return _ensure_venv(PEERS / "django-venv", DJANGO_REQUIREMENTS, "the Django peers'")


class SmtpSink:
    """Postfix's ``smtp-sink`` binary with the library path it needs."""

    def __init__(self, root: Path) -> None:
        self.binary = root / "usr" / "sbin" / "smtp-sink"
        self.library_path = ":".join(
            str(root / part)
            for part in ("usr/lib/postfix", "usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
        )

    def command(self, port: int, backlog: int = 256) -> list[str]:
        """``smtp-sink`` on 127.0.0.1:``port``; as root it must be told whom to run as."""
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        return [str(self.binary), *user, f"127.0.0.1:{port}", str(backlog)]

    def env(self) -> dict[str, str]:
        """The environment to start it with."""
        return dict(os.environ, LD_LIBRARY_PATH=self.library_path)

    def missing_libraries(self) -> list[str]:
        """Shared libraries the loader cannot find."""
        listing = subprocess.run(
            ["ldd", str(self.binary)], env=self.env(), capture_output=True, text=True, check=False
        ).stdout
        return [line.split()[0] for line in listing.splitlines() if "not found" in line]


def _download(package: str, version: str | None, into: Path) -> Path:
    spec = f"{package}={version}" if version else package
    done = subprocess.run(
        ["apt-get", "download", spec], cwd=into, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 and version is not None:
        print(f"{spec} is no longer in the archive; using the current {package}", flush=True)
        return _download(package, None, into)
    if done.returncode != 0:
        raise SystemExit(
            f"`apt-get download {spec}` failed: {done.stderr.strip()}; run `apt-get update` "
            "first, or skip the email rows with --workloads"
        )
    (deb,) = sorted(into.glob(f"{package}_*.deb"))
    return deb


def ensure_smtp_sink() -> SmtpSink:
    """Unpack postfix (once) and return its ``smtp-sink``, checked to start."""
    root = PEERS / "postfix"
    sink = SmtpSink(root)
    if sink.binary.exists() and not sink.missing_libraries():
        return sink
    print(f"unpacking Debian's postfix {POSTFIX_VERSION} into {root} ...", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        _run(["dpkg", "-x", str(_download("postfix", POSTFIX_VERSION, Path(scratch))), str(root)])
        if sink.missing_libraries():
            for package in _POSTFIX_LIBRARIES:
                _run(["dpkg", "-x", str(_download(package, None, Path(scratch))), str(root)])
    missing = sink.missing_libraries()
    if missing:
        raise SystemExit(f"smtp-sink still lacks {', '.join(missing)}")
    return sink


def describe_machine(admin_url: str | None) -> dict[str, str]:
    """Cores, CPU model, memory, kernel, Python, SQLite and PostgreSQL versions."""
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = "unknown"
    with open("/proc/meminfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    postgres = "unreachable"
    if admin_url is not None:
        try:
            with psycopg.connect(admin_url, connect_timeout=3) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                settings = conn.execute(
                    "SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) "
                    "FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', "
                    "'shared_buffers', 'wal_sync_method', 'max_connections')"
                ).fetchone()
            postgres = f"{row[0] if row else '?'} ({settings[0] if settings else ''})"
        except psycopg.Error as exc:
            postgres = f"unreachable ({exc})"
    load = Path("/proc/loadavg").read_text().split()[:3]
    return {
        "cores": str(os.cpu_count()),
        "cpu": re.sub(r"\s+", " ", cpu),
        "memory": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": postgres,
        "load average at start": " ".join(load),
    }
