"""docs/operations.md run by the shared page runner (tests/docs_snippets.py), and what its
examples print is checked too: the refusal it shows is the one the library gives."""

from __future__ import annotations

from pathlib import Path

from docs_snippets import ROOT, parse, run_page

DOC = ROOT / "docs" / "operations.md"


def test_the_operations_page_shows_the_refusal_the_library_gives(tmp_path: Path) -> None:
    output = run_page(parse(DOC.read_text(encoding="utf-8"), "docs/operations.md"), tmp_path)
    assert "only Pending or Claimed jobs can be aborted" in output
