"""Loads the named SQL blocks (``-- name: claim_jobs``) of each dialect once.

Internal. Queries are referred to by name so the Python code never builds SQL
from values: the one place that assembles text joins named blocks (SQLite's
claim for several queues: one numbered block per queue), and every value is
still a bound parameter.

Each statement is written once, in ``sql/common/*.sql``, with ``:name`` parameters.
A dialect's folder (``sql/sqlite``, ``sql/postgresql``) holds only the statements
that really differ, each overriding the common one of its name. The rules, all
checked at load (:class:`QueryError`):

- a common block whose first line is ``-- per-dialect`` has no body: every dialect
  must override it;
- a dialect block overrides a common one of its name, unless its first line is
  ``-- dialect-only`` (a statement the other dialects do without);
- a name is defined at most once per folder;
- the statements present agree with the dialect's
  :class:`~mailfathom.store.dialect.Capabilities`.

For psycopg, ``:name`` becomes ``%(name)s`` and a literal ``%`` becomes ``%%``
(:func:`to_pyformat`); a ``::type`` cast and a ``:`` inside quotes or comments stay
as they are. A statement is therefore always run with a parameter mapping (``{}``
when it has none) once it contains a ``%``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from mailfathom.store.dialect import CAPABILITIES, Capabilities, check_capabilities

__all__ = ["DIALECTS", "QueryError", "assemble", "load_queries", "to_pyformat"]

#: The dialects with a folder of overrides, and whether each takes psycopg's style.
DIALECTS: Mapping[str, bool] = {"sqlite": False, "postgresql": True}

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PER_DIALECT = "-- per-dialect"
_DIALECT_ONLY = "-- dialect-only"


class QueryError(ValueError):
    """The named SQL blocks break a loading rule (see the module docstring)."""


@dataclass(frozen=True)
class Block:
    """One named block: its SQL (comment lines left out) and its marker line, if any."""

    sql: str
    marker: str | None


def parse_blocks(text: str, source: str = "<text>") -> dict[str, Block]:
    """Split a file of ``-- name: x`` blocks into ``{name: Block}``; a name twice is an error."""
    blocks: dict[str, Block] = {}
    matches = list(_NAME.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        name = match.group(1)
        if name in blocks:
            raise QueryError(f"{source}: query {name!r} is defined twice")
        first = body.splitlines()[0].strip() if body else ""
        marker = first if first in (_PER_DIALECT, _DIALECT_ONLY) else None
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        blocks[name] = Block("\n".join(lines).strip().rstrip(";"), marker)
    return blocks


def parse_named_blocks(text: str) -> dict[str, str]:
    """``{name: sql}`` of a file of ``-- name: x`` blocks (markers dropped)."""
    return {name: block.sql for name, block in parse_blocks(text).items()}


def assemble(
    common: Mapping[str, Block], overrides: Mapping[str, Block], dialect: str
) -> dict[str, str]:
    """The statements of ``dialect``: the common ones, each overridden by the dialect's
    block of its name, plus the dialect's own (``-- dialect-only``)."""
    problems: list[str] = []
    queries: dict[str, str] = {}
    for name, block in common.items():
        if block.marker == _DIALECT_ONLY:
            problems.append(f"common query {name!r} is marked dialect-only")
        elif block.marker == _PER_DIALECT:
            if block.sql:
                problems.append(f"common query {name!r} is per-dialect but has a body")
            if name not in overrides:
                problems.append(f"{dialect} lacks query {name!r} (per-dialect in common)")
        else:
            queries[name] = block.sql
    for name, block in overrides.items():
        if block.marker == _PER_DIALECT:
            problems.append(f"{dialect} query {name!r} is marked per-dialect")
        elif block.marker == _DIALECT_ONLY and name in common:
            problems.append(f"{dialect} query {name!r} is dialect-only but also in common")
        elif block.marker != _DIALECT_ONLY and name not in common:
            problems.append(
                f"{dialect} query {name!r} overrides nothing in common"
                " (mark it -- dialect-only if only this dialect has it)"
            )
        if not block.sql:
            problems.append(f"{dialect} query {name!r} has no body")
        queries[name] = block.sql
    if problems:
        raise QueryError("; ".join(problems))
    return queries


_TOKENS = re.compile(
    r"""
      (?P<quoted>[eE]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|"(?:[^"]|"")*")
    | (?P<comment>--[^\n]*|/\*.*?\*/)
    | (?P<native>%\([A-Za-z_][A-Za-z0-9_]*\)[sbt])
    | (?P<cast>::)
    | :(?P<param>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<percent>%)
    """,
    re.VERBOSE | re.DOTALL,
)


def to_pyformat(sql: str) -> str:
    """``sql`` with psycopg's placeholders: ``:name`` → ``%(name)s``, ``%`` → ``%%``.

    Casts (``::bigint``), and ``:`` in string literals, quoted identifiers and comments
    stay; every ``%`` is doubled, there too, since psycopg reads the whole text. A
    placeholder already in psycopg's style (``%(keys)b``: binary) is kept as it is.
    """

    def replace(match: re.Match[str]) -> str:
        kind = match.lastgroup
        text = match.group(0)
        if kind == "param":
            return f"%({match.group('param')})s"
        if kind == "percent":
            return "%%"
        if kind in ("quoted", "comment"):
            return text.replace("%", "%%")
        return text  # a cast, or a native placeholder

    return _TOKENS.sub(replace, sql)


def _folder_blocks(folder: Traversable, label: str) -> dict[str, Block]:
    blocks: dict[str, Block] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            source = f"{label}/{entry.name}"
            for name, block in parse_blocks(entry.read_text(encoding="utf-8"), source).items():
                if name in blocks:
                    raise QueryError(f"{source}: query {name!r} of {label} is defined twice")
                blocks[name] = block
    return blocks


def build_queries(
    common: Mapping[str, Block],
    overrides: Mapping[str, Block],
    dialect: str,
    capabilities: Capabilities,
    *,
    pyformat: bool,
) -> dict[str, str]:
    """:func:`assemble`, checked against ``capabilities``, in the driver's style."""
    queries = assemble(common, overrides, dialect)
    try:
        check_capabilities(capabilities, set(queries))
    except ValueError as error:
        raise QueryError(f"{dialect}: {error}") from None
    if pyformat:
        queries = {name: to_pyformat(sql) for name, sql in queries.items()}
    return queries


@cache
def load_blocks(dialect: str) -> tuple[dict[str, Block], dict[str, Block]]:
    """The common blocks and ``dialect``'s overrides, as written in the package's files."""
    folder = resources.files("mailfathom.store") / "sql"
    return _folder_blocks(folder / "common", "common"), _folder_blocks(folder / dialect, dialect)


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """Every named query of ``dialect`` (``sqlite`` or ``postgresql``), ready to run."""
    common, overrides = load_blocks(dialect)
    return build_queries(
        common, overrides, dialect, CAPABILITIES[dialect], pyformat=DIALECTS[dialect]
    )
