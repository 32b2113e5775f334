"""The public surface is the documented surface: the public modules are the ones the
package docstring lists, each with a sorted, importable, documented ``__all__``; the docs
and the README import only from them, and the API reference renders every name."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
import typing
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

import mailfathom
from docs_snippets import ROOT, Block, pages, parse
from mailfathom.testing import claim

PUBLIC_MODULES = [
    "mailfathom",
    "mailfathom.testing",
    "mailfathom.devmail",
    "mailfathom.web",
    "mailfathom.observability",
    "mailfathom.contrib.django",
    "mailfathom.contrib.flask",
    "mailfathom.contrib.starlette",
]
# What the app offers only as internals: reaching for them in the docs is what this forbids.
_INTERNAL_ATTRIBUTE = re.compile(r"\b(?:mf|app)\.(?:store|queue|registry)\b")


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "docs_hooks/reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _python_blocks() -> list[Block]:
    """Every python block of the README and docs/, the skipped ones included."""
    return [
        block
        for path in pages()
        for block in parse(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
        if block.language == "python"
    ]


def _mailfathom_imports(code: str) -> list[tuple[str, str | None]]:
    """(module, name) of each ``from mailfathom… import name`` and (module, None) of
    each ``import mailfathom…`` in ``code``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mailfathom"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("mailfathom")]
    return found


def test_the_package_docstring_lists_the_public_modules() -> None:
    assert _hook().public_modules() == PUBLIC_MODULES
    assert "Every other module is internal" in (mailfathom.__doc__ or "")


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_exports_a_sorted_documented_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    assert inspect.getdoc(module), name
    for member in exported:
        value = getattr(module, member)
        assert value is not None, f"{name}.{member}"
        assert inspect.getdoc(value), f"{name}.{member} has no docstring"


def test_the_observability_names_load_lazily_and_refuse_unknown_ones() -> None:
    observability = importlib.import_module("mailfathom.observability")
    assert set(observability.__all__) <= set(dir(observability))
    with pytest.raises(AttributeError, match="no attribute 'store'"):
        _ = observability.store


def test_docs_and_readme_import_only_public_names_from_public_modules() -> None:
    blocks = _python_blocks()
    assert any(_mailfathom_imports(block.code) for block in blocks)  # the check checks something
    wrong = []
    for block in blocks:
        for module, name in _mailfathom_imports(block.code):
            where = f"{block.page}:{block.line}"
            if module not in PUBLIC_MODULES:
                wrong.append(f"{where} imports the internal module {module}")
            elif name is not None and name not in importlib.import_module(module).__all__:
                wrong.append(f"{where} imports {name}, not in {module}.__all__")
    assert wrong == []


def test_docs_and_readme_never_reach_into_the_app_internals() -> None:
    reaching = [
        f"{block.page}:{block.line}: {match.group()}"
        for block in _python_blocks()
        for match in _INTERNAL_ATTRIBUTE.finditer(block.code)
    ]
    assert reaching == []


def test_the_import_check_catches_an_internal_module_and_an_unlisted_name() -> None:
    code = "from mailfathom.delivery.phases import PhasePoint\nimport mailfathom.store\n"
    assert _mailfathom_imports(code) == [
        ("mailfathom.delivery.phases", "PhasePoint"),
        ("mailfathom.store", None),
    ]
    assert _INTERNAL_ATTRIBUTE.search("mf.queue.claim('w', 1, lease)")
    assert not _INTERNAL_ATTRIBUTE.search("mf.queues.pause('mail', actor='ops')")


def test_the_api_reference_renders_every_public_name() -> None:
    page = (ROOT / "docs/reference/api.md").read_text(encoding="utf-8")
    assert re.search(r"^<!-- generated: public-api -->$", page, re.M)
    text = _hook().public_api_markdown()
    for name in PUBLIC_MODULES:
        block = text.split(f"::: {name}\n", 1)[1].split("\n\n", 1)[0]
        listed = re.findall(r"^        - (\w+)$", block, re.M)
        assert sorted(listed) == sorted(importlib.import_module(name).__all__), name
        if name != "mailfathom":
            assert f"## `{name}` {{#{name}}}" in text
    for view in ("Jobs", "Outbox", "Queues", "Limits", "Schedules", "Workers", "RetentionStore"):
        assert f"(#mailfathom.{view})" in page  # each view of the app is named and linked


def test_the_views_of_the_app_are_the_exported_classes(tmp_path: Path) -> None:
    with mailfathom.MailFathom(f"sqlite:///{tmp_path / 'q.db'}") as mf:
        assert isinstance(mf.jobs, mailfathom.Jobs)
        assert isinstance(mf.outbox, mailfathom.Outbox)
        assert isinstance(mf.queues, mailfathom.Queues)
        assert isinstance(mf.limits, mailfathom.Limits)
        assert isinstance(mf.schedules, mailfathom.Schedules)
        assert isinstance(mf.workers, mailfathom.Workers)
        assert isinstance(mf.retention, mailfathom.RetentionStore)
        assert isinstance(mf.pruner(), mailfathom.Pruner)


def test_testing_claim_leases_what_a_worker_would_take(tmp_path: Path) -> None:
    with mailfathom.MailFathom(f"sqlite:///{tmp_path / 'q.db'}") as mf:
        mf.migrate()
        mail = mf.enqueue("send", {}, queue="mail")
        mf.enqueue("other", {}, queue="other")
        (taken,) = claim(mf, "w1", 10, timedelta(minutes=1), ["mail"])
        assert (taken.id, taken.state, taken.lease_owner) == (
            mail.id,
            mailfathom.JobState.CLAIMED,
            "w1",
        )
        assert claim(mf, "w2", 10, timedelta(minutes=1), ["mail"]) == []


def test_the_keywords_of_mailfathom_are_the_settings_with_their_types() -> None:
    """One source: each field of Settings is a keyword of ``MailFathom(...)``, in the same
    order, of the field's type (or None: not given, so read from the environment)."""
    parameters = inspect.signature(mailfathom.MailFathom).parameters
    own = ["database_url", "clock", "settings", "transport"]
    assert list(parameters)[: len(own)] == own
    assert parameters["database_url"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    settings_fields = [field.name for field in dataclasses.fields(mailfathom.Settings)]
    keywords = [name for name in parameters if name not in own[1:]]
    assert keywords == settings_fields
    app_types = typing.get_type_hints(mailfathom.MailFathom.__init__)
    field_types = typing.get_type_hints(mailfathom.Settings)
    for name in settings_fields:
        assert app_types[name] == field_types[name] | None, name
        assert parameters[name].default is None, name
        if name != "database_url":
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name


def test_a_keyword_beats_the_environment_and_a_bad_one_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MAILFATHOM_CONCURRENCY", "7")
    monkeypatch.setenv("MAILFATHOM_LEASE", "45")
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with mailfathom.MailFathom(url, concurrency=3, lease=None) as mf:
        assert (mf.settings.concurrency, mf.settings.lease) == (3, 45.0)
        assert mf.settings.audit_retention == "365d"  # left out: the default
    with pytest.raises(mailfathom.ConfigurationError, match="concurrency"):
        mailfathom.MailFathom(url, concurrency=0)


def test_every_other_module_says_it_is_internal() -> None:
    """A user who opens any module can tell whether it is API: each one that is not public
    says "Internal" in the first paragraphs of its docstring."""
    unmarked = []
    for path in sorted((ROOT / "src" / "mailfathom").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts)
        name = name.removesuffix(".__init__")
        if name in PUBLIC_MODULES:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if doc is None or not any("Internal" in part for part in doc.split("\n\n")[:2]):
            unmarked.append(name)
    assert unmarked == []
