"""The Python blocks of docs/retention.md run as written, in order, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parent.parent / "docs" / "retention.md"


def test_the_retention_page_code_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)
    assert blocks, "the page lost its examples"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # the documentation's own examples
    assert (tmp_path / "retention-demo.db").exists()
