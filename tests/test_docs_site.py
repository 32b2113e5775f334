"""The documentation site builds with ``mkdocs build --strict``, and its generated pages say
what the code says (every setting, every API operation, every command)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mailfathom import Settings
from mailfathom.web.openapi import document

ROOT = Path(__file__).resolve().parent.parent


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "docs_hooks/reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_page_lists_every_setting_with_its_comment() -> None:
    table = _hook().settings_markdown()
    for field in dataclasses.fields(Settings):
        (row,) = [line for line in table.splitlines() if line.startswith(f"| `{field.name}`<")]
        assert f"`MAILFATHOM_{field.name.upper()}`" in row
        assert row.rstrip(" |").split("|")[-1].strip(), f"{field.name} has no #: comment"
    assert "`'sqlite:///mailfathom.db'`" in table


def test_the_json_api_page_lists_every_operation_and_schema() -> None:
    text = _hook().openapi_markdown()
    spec = document()
    for path, methods in spec["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in text
    for name in spec["components"]["schemas"]:
        assert f"{{#schema-{name.lower()}}}" in text
    assert "Bearer &lt;token&gt;" in text  # shown as written, not swallowed as an HTML tag


@pytest.mark.slow  # the whole MkDocs build: run with the slow tests, which CI runs too
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Broken links, anchors, references and nav entries fail the build (warnings are errors)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    api = (site / "reference/api/index.html").read_text(encoding="utf-8")
    assert 'id="mailfathom.MailFathom.enqueue"' in api  # from the docstrings
    hook = _hook()
    unrendered = [
        f"{module}.{name}"
        for module in hook.public_modules()
        for name in importlib.import_module(module).__all__
        if f'id="{module}.{name}"' not in api
    ]
    assert unrendered == []  # every public name of every public module has its entry
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    assert re.search(r"mailfathom worker", cli) and "--burst" in cli  # from click
    assert "Sentinel" not in cli
    settings = (site / "reference/settings/index.html").read_text(encoding="utf-8")
    assert "MAILFATHOM_CLOCK_SKEW" in settings
    assert ":class:" not in api and ":meth:" not in api
    errors = (site / "reference/errors/index.html").read_text(encoding="utf-8")
    assert "├── ConfigurationError" in errors and "<p>::</p>" not in errors
    quoted = (site / "contributing/index.html").read_text(encoding="utf-8")
    assert "generated: settings" in quoted  # a marker quoted in a sentence stays as written
    machines = (site / "state-machines/index.html").read_text(encoding="utf-8")
    assert machines.count('class="mermaid"') >= 2
    assert (site / "charts/processing.svg").is_file()


def _build(config: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` as ``make docs`` runs it, on ``config``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


def test_a_page_missing_from_nav_is_reported_and_a_broken_link_fails(tmp_path: Path) -> None:
    """The site's validation settings (inherited from mkdocs.yml) on a two-page site."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the new page](new.md#usage).\n")
    (docs / "new.md").write_text("# New\n\n## Usage\n\nLanded before its nav entry.\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nsite_dir: {tmp_path / 'site'}\n"
        "hooks: []\nnav:\n  - Home: index.md\n"
    )
    done = _build(config)
    assert done.returncode == 0, done.stderr
    assert "not included in the" in done.stderr and "new.md" in done.stderr

    (docs / "new.md").write_text("# New\n\nSee [the old page](old.md).\n")  # anchor gone too
    done = _build(config)
    assert done.returncode == 1
    assert "'old.md'" in done.stderr and "'#usage'" in done.stderr, done.stderr
