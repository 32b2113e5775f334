"""Each integration page's install line installs everything its examples import.

A team follows docs/fastapi.md (flask.md, sqlalchemy.md, testing.md) from its first
line: what ``pip install`` names there — mailfathom, its extras, any package added —
must bring every module the page's examples import, lazily imported ones included
(Starlette's ``TestClient`` imports ``httpx2`` only when it is used). The install
closure is read from the installed distributions' metadata; the page's Python blocks
then run in a fresh process in which importing a module of any distribution outside
that closure fails, as it would in the team's new virtualenv.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from doc_snippets import DOCS, python_blocks

_GUARDED_RUN = r"""
import json, sys, types
from importlib.abc import MetaPathFinder

spec = json.loads(sys.stdin.read())
blocked = set(spec["blocked"])


class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in blocked:
            raise ModuleNotFoundError(
                f"No module named {name!r}: the page's pip install line does not install it",
                name=name,
            )
        return None


sys.meta_path.insert(0, NotInstalled())
module = types.ModuleType("docs_page")
sys.modules["docs_page"] = module  # FastAPI resolves annotations through the module
try:
    for code in spec["blocks"]:
        exec(compile(code, spec["page"], "exec"), module.__dict__)
finally:
    from mailfathom import MailFathom

    for value in list(module.__dict__.values()):
        if isinstance(value, MailFathom):
            value.close()
"""


def install_line(page: str) -> list[str]:
    """The requirements the page's first shell block installs."""
    text = (DOCS / page).read_text(encoding="utf-8")
    first_block = text.split("```")[1]
    assert first_block.startswith("sh\n"), f"{page} does not start with its install line"
    named: list[str] = []
    for line in first_block.splitlines()[1:]:
        words = shlex.split(line, comments=True)
        if words[:2] == ["pip", "install"]:
            named += [word for word in words[2:] if not word.startswith("-")]
    assert named, f"{page}'s first block installs nothing"
    return named


def closure(requirements: list[str]) -> set[str]:
    """Every distribution ``pip install`` of ``requirements`` brings (canonical names)."""
    todo = [Requirement(text) for text in requirements]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        wanted = todo.pop()
        key = (canonicalize_name(wanted.name), frozenset(wanted.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(wanted.name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing can import it either
        for line in dist.requires or []:
            sub = Requirement(line)
            extras = wanted.extras or {""}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return {name for name, _ in seen}


def not_installed(installed: set[str]) -> list[str]:
    """Top-level modules that belong only to distributions outside ``installed``."""
    return sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not {canonicalize_name(d) for d in dists} & installed
    )


@pytest.mark.parametrize("page", ["fastapi.md", "flask.md", "sqlalchemy.md"])
def test_the_install_line_brings_what_the_examples_import(page: str, tmp_path: Path) -> None:
    spec = {
        "blocked": not_installed(closure(install_line(page))),
        "blocks": python_blocks(page),
        "page": str(DOCS / page),
    }
    done = subprocess.run(
        [sys.executable, "-c", _GUARDED_RUN],
        input=json.dumps(spec),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_guard_catches_a_missing_test_dependency(tmp_path: Path) -> None:
    """Without httpx2 on the line, the FastAPI page's TestClient example fails."""
    installed = closure(["mailfathom[fastapi]"])
    assert "httpx2" not in installed and "fastapi" in installed
    spec = {
        "blocked": not_installed(installed),
        "blocks": [
            "from fastapi import FastAPI\nfrom fastapi.testclient import TestClient\n"
            "TestClient(FastAPI())\n"
        ],
        "page": "page.md",
    }
    done = subprocess.run(
        [sys.executable, "-c", _GUARDED_RUN],
        input=json.dumps(spec),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "httpx2" in done.stderr, done.stderr


def test_the_testing_page_installs_no_extra_and_the_plugin_ships_in_the_base_package() -> None:
    named = install_line("testing.md")
    assert not [r for r in named if Requirement(r).extras], named
    plugins = [
        ep for ep in metadata.entry_points(group="pytest11") if ep.value == "mailfathom.testing"
    ]
    assert [ep.dist.name for ep in plugins if ep.dist is not None] == ["mailfathom"]
    installed = closure(named)
    blocked = set(not_installed(installed))
    # the page's Django recipe installs what it needs itself (its own `pip install` line)
    base, _, django = (
        (DOCS / "testing.md").read_text(encoding="utf-8").partition("## Django, with pytest-django")
    )
    imported = _imports_of(base)
    assert imported and not imported & blocked, imported & blocked
    assert "pytest" in installed
    django_line = [w for w in django.split("```sh\n", 1)[1].split("```")[0].split() if "=" not in w]
    assert django_line[:2] == ["pip", "install"], django_line
    django_installed = closure([w.strip('"') for w in django_line[2:]])
    django_imported = _imports_of(django)
    assert "django" in django_installed
    assert django_imported and not django_imported & set(not_installed(django_installed)), (
        django_imported & set(not_installed(django_installed))
    )


def _imports_of(text: str) -> set[str]:
    """The top-level modules the Python blocks of ``text`` import."""
    return {
        name.partition(".")[0]
        for block in re.findall(r"```python\n(.*?)```", text, re.S)
        for name in _imported(ast.parse(block))
    }


def _imported(tree: ast.Module) -> list[str]:
    """Every module a block imports (absolute imports only, as a user's test has)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
    return found
