"""The suite does not depend on the shell that runs it (tests/conftest.py's autouse fixture).

A developer's ``MAILFATHOM_SMTP_URL`` or ``./mailfathom.toml`` used to leak into the
fixtures and fail tests that expect the defaults. Here pytest is started the way such
a developer would start it — from a directory holding a ``mailfathom.toml`` and with
``MAILFATHOM_*`` variables set — on a test that depends on the defaults; it must pass.
A control first shows that the same environment and file do change the settings of a
process that is not isolated, so the check could fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mailfathom.config import Settings

ROOT = Path(__file__).resolve().parent.parent
POLLUTED = {
    "MAILFATHOM_SMTP_URL": "smtp://127.0.0.1:9",
    "MAILFATHOM_DATABASE_URL": "sqlite:///from-the-environment.db",
    "MAILFATHOM_WEB_TOKEN": "from-the-environment",
}
TOML = '[mailfathom]\nsmtp_url = "smtp://127.0.0.1:9"\ndelivery_max_attempts = 1\n'


def test_a_test_sees_no_setting_of_the_caller(isolated_from_the_caller: Path) -> None:
    assert Path.cwd() == isolated_from_the_caller
    assert not Path("mailfathom.toml").exists()
    assert not [name for name in os.environ if name in POLLUTED]
    defaults = Settings.load()
    assert defaults.smtp_url is None
    assert defaults.database_url == "sqlite:///mailfathom.db"


def test_a_polluted_shell_and_a_local_toml_change_no_result(tmp_path: Path) -> None:
    (tmp_path / "mailfathom.toml").write_text(TOML, encoding="utf-8")
    env = {**os.environ, **POLLUTED}
    control = subprocess.run(
        [sys.executable, "-c", "from mailfathom.config import Settings as S; print(S.load())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "smtp://127.0.0.1:9" in control.stdout  # not isolated: the settings change
    assert "delivery_max_attempts=1" in control.stdout
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(ROOT),
            "-c",
            str(ROOT / "pyproject.toml"),
            f"{ROOT}/tests/test_isolation.py::test_a_test_sees_no_setting_of_the_caller",
            f"{ROOT}/tests/test_outbox_smtp.py::test_no_smtp_server_configured_fails_transiently",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout  # the second test runs on both stores
