"""The Python blocks of docs/fastapi.md, flask.md, sqlalchemy.md and testing.md run as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from doc_snippets import close_apps, python_blocks, run_blocks


@pytest.mark.parametrize("page", ["fastapi.md", "flask.md", "sqlalchemy.md", "testing.md"])
def test_each_page_starts_from_pip_install(page: str) -> None:
    text = (Path(__file__).parent.parent / "docs" / page).read_text(encoding="utf-8")
    first_block = text.split("```")[1]
    assert first_block.startswith(("sh\npip install 'mailfathom[", "sh\npip install mailfathom "))
    assert python_blocks(page), "the page has no Python to run"


@pytest.mark.parametrize("page", ["fastapi.md", "flask.md", "sqlalchemy.md"])
def test_the_page_runs_as_written(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # their sqlite:///app.db lands here
    namespace: dict[str, object] = {}
    try:
        namespace = run_blocks(page)
    finally:
        close_apps(namespace)


def test_the_testing_page_runs_as_a_users_suite(pytester: pytest.Pytester) -> None:
    conftest, test, *_django = python_blocks("testing.md")  # test_django_deploy.py: the rest
    pytester.makeconftest('pytest_plugins = ["mailfathom.testing"]\n\n' + conftest)
    pytester.makepyfile(test_signup=test)
    pytester.runpytest("-p", "no:cacheprovider", "-W", "error").assert_outcomes(passed=1)
