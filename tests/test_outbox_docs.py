"""The Python blocks of docs/outbox.md run as written, against a real SMTP server process.

The blocks run in order in one namespace, in a fresh directory (their
``sqlite:///app.db`` is created there); the only change made to them is the
documented relay's address, pointed at the test server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smtp_fixtures import FaultServer

DOC = Path(__file__).parent.parent / "docs" / "outbox.md"
DOC_RELAY = "smtp://mail.example.com:587"


def blocks() -> list[str]:
    """Every ```python block of the page, in order."""
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def test_the_outbox_page_has_the_blocks_this_test_runs() -> None:
    found = blocks()
    assert len(found) >= 2 and DOC_RELAY in found[0]


def test_the_outbox_page_code_runs(
    smtp: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    try:
        for block in blocks():
            code = compile(block.replace(DOC_RELAY, smtp.url()), str(DOC), "exec")
            exec(code, namespace)  # the documentation's own examples
    finally:
        app = namespace.get("mf")
        if app is not None:
            app.close()  # type: ignore[attr-defined]
    accepted = [r.rcpt_tos for r in smtp.accepted()]
    assert accepted[:2] == [["customer@example.org", "audit@example.com"]] * 2
    assert sorted(accepted[2:]) == [["ann@gmail.com"], ["bob@gmail.com"], ["dee@example.org"]]
