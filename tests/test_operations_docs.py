"""The Python blocks of docs/operations.md run as written, in order, in one namespace,
in a fresh directory (their ``sqlite:///ops.db`` is created there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parent.parent / "docs" / "operations.md"


def blocks() -> list[str]:
    """Every ```python block of the page, in order."""
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def test_the_operations_page_code_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    found = blocks()
    assert len(found) >= 6
    namespace: dict[str, object] = {}
    for block in found:
        exec(compile(block, str(DOC), "exec"), namespace)  # the documentation's own examples
    assert "only Claimed jobs can be aborted" in capsys.readouterr().out
