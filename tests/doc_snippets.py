"""Run a documentation page's Python blocks as written, the way a reader would paste them.

The blocks of one page run in order, in one namespace, in the current directory
(tests ``chdir`` to a temporary one first); ``replace`` swaps literal text (a
documented server address for the test's own) and nothing else.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

DOCS = Path(__file__).parent.parent / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: str) -> list[str]:
    """Every ```python block of ``docs/<page>``, in order."""
    return _BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))


def run_blocks(page: str, *, replace: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``docs/<page>``'s Python blocks in one namespace; returns the namespace.

    The namespace is a real module while the blocks run (registered in ``sys.modules``,
    as a pasted script's ``__main__`` is), so libraries that resolve annotations through
    the defining module (SQLAlchemy's ``Mapped[...]``, FastAPI) see the page's names.
    """
    name = "docs_" + re.sub(r"\W", "_", page.removesuffix(".md"))
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        for block in python_blocks(page):
            code = block
            for old, new in (replace or {}).items():
                code = code.replace(old, new)
            exec(compile(code, str(DOCS / page), "exec"), module.__dict__)  # the page's code
    finally:
        del sys.modules[name]
    return module.__dict__


def close_apps(namespace: dict[str, Any]) -> None:
    """Close every MailFathom the blocks made (their connections and threads)."""
    from mailfathom import MailFathom

    for value in namespace.values():
        if isinstance(value, MailFathom):
            value.close()
