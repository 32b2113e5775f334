"""What a tutorial shows a command printing is what that command prints.

The page runner (tests/docs_snippets.py) runs a ``console`` block's commands but does
not compare their output, which may hold ids and times. Output that holds neither —
``mailfathom migrate`` on a new database: how many migrations, and which — is
compared here, ``…`` standing for the rest of the line; a new migration then fails
this test until the tutorial shows the new count.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_snippets import ROOT, parse

SHOWN = [("docs/tutorial/first-job.md", "mailfathom migrate")]


def shown_output(page: str, command: str) -> list[str]:
    """The lines a ``console`` block of ``page`` shows after ``$ command``."""
    for block in parse((ROOT / page).read_text(encoding="utf-8"), page):
        lines = block.code.splitlines()
        if block.language == "console" and f"$ {command}" in lines:
            after = lines[lines.index(f"$ {command}") + 1 :]
            return [line for line in after[: _next_prompt(after)] if line.strip()]
    raise AssertionError(f"{page} shows no `$ {command}`")


def _next_prompt(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines) if line.startswith("$ ")), len(lines))


def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in line.split("…")) + r"\Z")


@pytest.mark.parametrize(("page", "command"), SHOWN)
def test_the_page_shows_what_the_command_prints(page: str, command: str, tmp_path: Path) -> None:
    shown = shown_output(page, command)
    assert shown, f"{page} shows nothing after `$ {command}`"
    mailfathom = Path(sys.executable).with_name("mailfathom")
    done = subprocess.run(
        [str(mailfathom), "--database", f"sqlite:///{tmp_path / 'new.db'}", *command.split()[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    printed = done.stdout.splitlines()
    assert len(printed) == len(shown), (shown, printed)
    for want, got in zip(shown, printed, strict=True):
        assert _pattern(want).match(got), f"{page} shows {want!r}, the command prints {got!r}"
