"""MkDocs hook: the reference pages that are generated from the code, so they cannot drift.

A page asks for a generated part with a marker comment on a line of its own:

- ``<!-- generated: settings -->`` — every field of :class:`mailfathom.Settings`: its
  environment variable, type, default and the ``#:`` comment above it in ``config.py``.
- ``<!-- generated: openapi -->`` — every operation and schema of the console's OpenAPI
  document (``mailfathom.web.openapi.document()``), the one ``/api/openapi.json`` serves.
- ``<!-- generated: public-api -->`` — every public module (the list in the docstring of
  ``mailfathom/__init__.py``) and every name of its ``__all__``, rendered by mkdocstrings.

MkDocs loads this file by path (``hooks:`` in mkdocs.yml); the functions that render
are plain and tested by ``tests/test_docs_site.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
if str(SRC) not in sys.path:  # mkdocs runs from the repository root; the code lives in src/
    sys.path.insert(0, str(SRC))

SETTINGS_MARKER = "<!-- generated: settings -->"
OPENAPI_MARKER = "<!-- generated: openapi -->"
PUBLIC_API_MARKER = "<!-- generated: public-api -->"

__all__ = [
    "OPENAPI_MARKER",
    "PUBLIC_API_MARKER",
    "SETTINGS_MARKER",
    "on_page_content",
    "on_page_markdown",
    "openapi_markdown",
    "public_api_markdown",
    "public_modules",
    "settings_markdown",
]

# Docstrings cross-reference with reST roles (:class:`X`); the rendered page shows the name.
_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):(?=<code>)")
# click 8.2+ marks an option without a default with a sentinel, which mkdocs-click prints.
_NO_DEFAULT = "<td><code>Sentinel.UNSET</code></td>"


def _field_comments(source: str) -> dict[str, str]:
    """The ``#:`` comment lines written above each field of ``class Settings``."""
    tree = ast.parse(source)
    lines = source.splitlines()
    comments: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "Settings"):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                found: list[str] = []
                index = item.lineno - 2
                while index >= 0 and lines[index].strip().startswith("#:"):
                    found.insert(0, lines[index].strip()[2:].strip())
                    index -= 1
                comments[item.target.id] = " ".join(found)
    return comments


def _plain(text: str) -> str:
    """Text from the code shown as written: ``<token>`` must not become an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def settings_markdown() -> str:
    """The settings table: one row per field of Settings, in the order they are declared."""
    from mailfathom.config import Settings

    source = (SRC / "mailfathom" / "config.py").read_text(encoding="utf-8")
    comments = _field_comments(source)
    rows = [
        "| setting | type and default | what it does |",
        "|---|---|---|",
    ]
    for field in dataclasses.fields(Settings):
        default = "none" if field.default is None else f"`{field.default!r}`"
        annotation = str(field.type).replace(" | None", " or none")
        rows.append(
            f"| `{field.name}`<br>`MAILFATHOM_{field.name.upper()}` | {_cell(annotation)}, "
            f"{_cell(default)} | {_cell(comments.get(field.name, ''))} |"
        )
    return "\n".join(rows)


def _schema_text(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link to a component, or its type."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    if schema.get("type") == "array" and "items" in schema:
        return f"array of {_schema_text(schema['items'])}"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    if "format" in schema:
        text += f" ({schema['format']})"
    if schema.get("type") == "object" and "properties" in schema:
        text += " with " + ", ".join(f"`{name}`" for name in schema["properties"])
    return text


def _body_schema(holder: dict[str, Any]) -> dict[str, Any]:
    content = holder.get("content", {})
    return dict(content.get("application/json", {}).get("schema", {}))


def _operation_markdown(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", _plain(str(operation.get("summary", ""))), ""]
    params = operation.get("parameters", [])
    if params:
        lines += ["| parameter | in | required | schema | description |", "|---|---|---|---|---|"]
        for param in params:
            lines.append(
                f"| `{param['name']}` | {param['in']} | {'yes' if param.get('required') else 'no'}"
                f" | {_cell(_schema_text(param.get('schema', {})))} | "
                f"{_cell(_plain(str(param.get('description', ''))))} |"
            )
        lines.append("")
    if "requestBody" in operation:
        body = _schema_text(_body_schema(operation["requestBody"]))
        lines += [f"Body (JSON): {body}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, response in operation["responses"].items():
        lines.append(
            f"| {status} | {_cell(_plain(str(response.get('description', ''))))} | "
            f"{_cell(_schema_text(_body_schema(response)))} |"
        )
    lines.append("")
    return lines


def _component_markdown(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#schema-{name.lower()}}}", ""]
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return [*lines, _schema_text(schema), ""]
    required = set(schema.get("required", []))
    lines += ["| field | schema | required |", "|---|---|---|"]
    for field, sub in properties.items():
        lines.append(
            f"| `{field}` | {_cell(_schema_text(sub))} | {'yes' if field in required else 'no'} |"
        )
    lines.append("")
    return lines


def openapi_markdown(document: dict[str, Any] | None = None) -> str:
    """Every operation, then every component schema, of the console's OpenAPI document."""
    if document is None:
        from mailfathom.web.openapi import document as build

        document = build()
    lines = [
        f"OpenAPI {document['openapi']}: *{document['info']['title']}*, version "
        f"{document['info']['version']}. {_plain(document['info'].get('description', ''))}",
        "",
        "## Operations",
        "",
    ]
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            lines += _operation_markdown(path, method, operation)
    lines += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        lines += _component_markdown(name, schema)
    return "\n".join(lines)


# A bullet of the package docstring's list of public modules: ``- ``mailfathom.x``: …``
# (one bullet may name several, separated by commas, before its colon).
_PUBLIC_BULLET = re.compile(r"^- ((?:``mailfathom[\w.]*``,?\s*)+):", re.M)
_MODULE_NAME = re.compile(r"``(mailfathom[\w.]*)``")


def public_modules() -> list[str]:
    """The public modules, in the order the docstring of ``mailfathom/__init__.py`` lists them."""
    import mailfathom

    found: list[str] = []
    for bullet in _PUBLIC_BULLET.finditer(mailfathom.__doc__ or ""):
        found += _MODULE_NAME.findall(bullet.group(1))
    return found


def public_api_markdown() -> str:
    """A section per public module with an mkdocstrings block of its ``__all__``."""
    lines: list[str] = []
    for name in public_modules():
        exported = sorted(importlib.import_module(name).__all__, key=str.lower)
        if name != "mailfathom":
            lines += [f"## `{name}` {{#{name}}}", ""]
        lines += [
            f"::: {name}",
            "    options:",
            "      show_root_heading: false",
            "      show_submodules: false",
            "      members_order: alphabetical",
            f"      heading_level: {2 if name == 'mailfathom' else 3}",
            "      members:",
            *(f"        - {member}" for member in exported),
            "",
        ]
    return "\n".join(lines)


def _marker(name: str) -> re.Pattern[str]:
    """A marker alone on its line (quoted in a sentence, it is left as written)."""
    return re.compile(rf"^<!-- generated: {name} -->$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: replace each marker with the part it names."""
    for name, render in (
        ("settings", settings_markdown),
        ("openapi", openapi_markdown),
        ("public-api", public_api_markdown),
    ):
        pattern = _marker(name)
        if pattern.search(markdown):
            markdown = pattern.sub(render().replace("\\", "\\\\"), markdown)
    return markdown


def on_page_content(html: str, **_: Any) -> str:
    """MkDocs event: reST roles and literal-block markers dropped from docstrings; an
    option without a default shows an empty cell, not click's sentinel."""
    html = _ROLE.sub("", html).replace(_NO_DEFAULT, "<td></td>")
    return html.replace("<p>::</p>\n", "")  # a reST literal-block marker on its own line
