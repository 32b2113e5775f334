"""Every code example of the README and docs/ runs as written (rules: tests/docs_snippets.py).

Each page with runnable blocks is one test: its blocks run in order in one fresh process
in a temporary directory, against a SQLite file there. A page whose blocks need a real
SMTP server is run by its own test instead (``RUN_ELSEWHERE``), never twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_snippets import ROOT, Block, pages, parse, run_page

RUN_ELSEWHERE = {
    "docs/outbox.md": "tests/test_outbox_docs.py runs it against an SMTP server",
    "docs/operations.md": "tests/test_operations_docs.py runs it and checks what it prints",
    "docs/django.md": "tests/test_django.py and test_django_deploy.py run it in a Django project",
    "docs/fastapi.md": "tests/test_integration_docs.py runs its Python blocks",
    "docs/flask.md": "tests/test_integration_docs.py runs its Python blocks",
    "docs/sqlalchemy.md": "tests/test_integration_docs.py runs its Python blocks",
    "docs/testing.md": "tests/test_integration_docs.py runs it as a user's test suite",
    "docs/observability.md": "tests/test_observability_docs.py runs its Python blocks",
}


def _blocks(path: Path) -> list[Block]:
    page = path.relative_to(ROOT).as_posix()
    return parse(path.read_text(encoding="utf-8"), page)


def _runnable_pages() -> list[str]:
    found = []
    for path in pages():
        page = path.relative_to(ROOT).as_posix()
        if page not in RUN_ELSEWHERE and any(block.runs for block in _blocks(path)):
            found.append(page)
    return found


@pytest.mark.parametrize("page", _runnable_pages())
def test_the_page_examples_run(page: str, tmp_path: Path) -> None:
    run_page(_blocks(ROOT / page), tmp_path)


def test_every_skipped_block_says_why() -> None:
    unexplained = [
        f"{block.page}:{block.line}"
        for path in pages()
        for block in _blocks(path)
        if block.skip is not None and len(block.skip) < 8
    ]
    assert unexplained == [], "write why after <!-- skip: -->"


def test_no_runnable_block_installs_anything() -> None:
    """(The pages run elsewhere run only their Python blocks, never their shell ones.)"""
    installing = [
        f"{block.page}:{block.line}"
        for path in pages()
        if path.relative_to(ROOT).as_posix() not in RUN_ELSEWHERE
        for block in _blocks(path)
        if block.installs
    ]
    assert installing == [], "tag these <!-- skip: installs ... -->"


def test_a_page_that_would_install_is_refused_before_anything_runs(tmp_path: Path) -> None:
    page = "```sh\ntouch ran\n```\n\n```sh\npip install 'mailfathom[flask]'\n```\n"
    with pytest.raises(AssertionError, match=r"page.md:5 would install packages"):
        run_page(parse(page, "page.md"), tmp_path)
    assert not (tmp_path / "ran").exists()


def test_the_tutorials_run_most_of_their_examples() -> None:
    """A tutorial is followed by hand: what it shows must be what the test runs."""
    for path in sorted((ROOT / "docs" / "tutorial").glob("*.md")):
        blocks = [b for b in _blocks(path) if b.language in ("python", "sh", "console")]
        assert blocks, path
        skipped = [b for b in blocks if b.skip is not None]
        assert len(skipped) * 2 < len(blocks), f"{path}: most examples are skipped"


PAGE = """
```python
x = 1
```

<!-- skip: shows a command that fails -->
```sh
exit 9
```

```python title="saved.py"
Y = 2
```

```console
$ test -f saved.py && \\
>   echo saved
saved
```

```python
from saved import Y

assert (x, Y) == (1, EXPECTED)
```
"""


def test_the_rules_run_what_they_say(tmp_path: Path) -> None:
    blocks = parse(PAGE.replace("EXPECTED", "2"), "page.md")
    assert [(b.language, b.skip is None, b.file) for b in blocks] == [
        ("python", True, None),
        ("sh", False, None),
        ("python", True, "saved.py"),
        ("console", True, None),
        ("python", True, None),
    ]
    output = run_page(blocks, tmp_path)
    assert "saved\n" in output


def test_a_failing_block_fails_the_page(tmp_path: Path) -> None:
    blocks = parse(PAGE.replace("EXPECTED", "3"), "page.md")
    with pytest.raises(AssertionError, match=r'page.md", line 2[0-9]'):
        run_page(blocks, tmp_path)


def test_pages_run_elsewhere_exist_and_run_there() -> None:
    for page, why in RUN_ELSEWHERE.items():
        runner = ROOT / why.split()[0]
        assert (ROOT / page).is_file() and runner.is_file()
        assert page in runner.read_text(encoding="utf-8") or Path(page).name in runner.read_text(
            encoding="utf-8"
        )
