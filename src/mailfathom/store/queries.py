"""Loads each dialect's named SQL blocks (``-- name: claim_jobs``) once.

Internal. Queries are referred to by name so the Python code never builds SQL
from values: the one place that assembles text joins named blocks (SQLite's
claim for several queues: one numbered block per queue), and every value is
still a bound parameter.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["load_queries"]

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_named_blocks(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` blocks into ``{name: sql}``; duplicate names are an error."""
    blocks: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        name = match.group(1)
        if name in blocks:
            raise ValueError(f"query {name!r} is defined twice")
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        blocks[name] = "\n".join(lines).strip().rstrip(";")
    return blocks


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """Every named query of ``dialect`` (``sqlite`` or ``postgresql``), from all its files."""
    folder = resources.files("mailfathom.store") / "sql" / dialect
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, sql in parse_named_blocks(entry.read_text(encoding="utf-8")).items():
                if name in queries:
                    raise ValueError(f"query {name!r} of {dialect} is defined twice")
                queries[name] = sql
    return queries
