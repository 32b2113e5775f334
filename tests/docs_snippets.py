"""Find the code blocks of the documentation and run one page's blocks, as a reader would.

The rules (docs/contributing.md says them for authors):

- A fenced block tagged ``python`` runs; the page's python blocks run in order in one
  namespace, in one fresh process, in an empty temporary directory.
- A ``python`` block with a ``title="name.py"`` attribute is a file the reader saves:
  it is written to that name in the directory (and importable from there), not run.
- A ``sh``/``bash`` block runs with ``bash -e -o pipefail``; a ``console`` block runs
  the lines that start with ``$ `` (and their ``> `` continuations; its other lines are
  output). Both run in the same
  directory, with the venv's ``bin`` first on ``PATH`` (so ``mailfathom`` is the one
  under test) and ``MAILFATHOM_DATABASE_URL`` naming a SQLite file there.
- ``<!-- skip: reason -->`` on the line before the fence leaves a block out: a synopsis
  with placeholders, a server or a process that runs until stopped, PostgreSQL, a
  long run. The reason is required and shown on the page's source.
- Blocks in any other language (or none) are never run.
- A runnable block may not install anything (``pip install``, ``apt-get install``): the
  test would change the venv it runs in. Such a block must be tagged skip; ``run_page``
  refuses to start a page that has one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ROOT", "Block", "pages", "parse", "prepare", "run_page"]

ROOT = Path(__file__).resolve().parent.parent
RUN_LANGUAGES = {"python": "python", "sh": "sh", "bash": "sh", "console": "console"}
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
_SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
_TITLE = re.compile(r"""title\s*=\s*["']([^"']+)["']""")
_INSTALLS = re.compile(r"\b(?:pip3?|uv\s+pip|apt(?:-get)?|npm)\s+install\b")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, how it is tagged and what it holds."""

    page: str
    line: int
    language: str
    info: str
    code: str
    skip: str | None
    """The reason given in ``<!-- skip: ... -->``, or None when the block runs."""
    file: str | None
    """The ``title="…"`` of a python block: the file it is saved as instead of run."""

    @property
    def runs(self) -> bool:
        """Whether the snippet test runs (or writes) this block."""
        return self.skip is None and self.language in RUN_LANGUAGES

    @property
    def installs(self) -> bool:
        """Whether running this block would install packages (it must be tagged skip)."""
        return self.runs and self.file is None and _INSTALLS.search(self.code) is not None


def parse(text: str, page: str) -> list[Block]:
    """Every fenced block of one Markdown page, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, indent, info = opened["fence"], opened["indent"], opened["info"].strip()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not (
            lines[index].strip().startswith(fence) and lines[index].strip().strip(fence[0]) == ""
        ):
            line = lines[index]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            index += 1
        index += 1
        words = info.replace("{", " ").replace("}", " ").split()
        language = words[0].lstrip(".").lower() if words else ""
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        skipped = _SKIP.match(previous)
        title = _TITLE.search(info)
        blocks.append(
            Block(
                page=page,
                line=start + 1,
                language=language,
                info=info,
                code="\n".join(body) + "\n",
                skip=skipped["reason"] if skipped else None,
                file=title.group(1) if title and language == "python" else None,
            )
        )
    return blocks


def pages() -> list[Path]:
    """README.md and every page under docs/, sorted."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


_DRIVER = r"""
import json, os, subprocess, sys
from pathlib import Path

blocks = json.loads(Path(sys.argv[1]).read_text())
sys.path.insert(0, os.getcwd())
namespace = {"__name__": "__main__"}
for block in blocks:
    where = f"{block['page']}:{block['line']}"
    print(f"--- {where} ({block['language']})", flush=True)
    language, code = block["language"], block["code"]
    if block["file"]:
        Path(block["file"]).parent.mkdir(parents=True, exist_ok=True)
        Path(block["file"]).write_text(code)
        continue
    if language == "python":
        exec(compile("\n" * block["line"] + code, block["page"], "exec"), namespace)
        continue
    if language == "console":
        commands, current = [], ""
        for line in code.splitlines():
            if current:
                current += "\n" + (line[2:] if line.startswith("> ") else line)
            elif line.startswith("$ "):
                current = line[2:]
            if current and not current.endswith("\\"):
                commands.append(current)
                current = ""
        code = "\n".join(commands) + "\n"
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], check=False)
    if done.returncode:
        sys.exit(f"{where}: the shell block exited with {done.returncode}")
"""


def prepare(directory: Path) -> dict[str, str]:
    """Make ``directory`` a reader's working directory; the environment its commands get.

    ``.venv`` and ``examples`` link to the checkout's (the README's commands use them);
    the venv's ``bin`` comes first on ``PATH``; ``MAILFATHOM_DATABASE_URL`` names a SQLite
    file in the directory; this tree's ``src`` and the directory are importable.
    """
    venv = Path(sys.executable).parent.parent
    if not (directory / ".venv").exists():
        (directory / ".venv").symlink_to(venv)
        (directory / "examples").symlink_to(ROOT / "examples")
    return {
        **os.environ,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), str(directory), os.environ.get("PYTHONPATH", "")]
        ),
        "MAILFATHOM_DATABASE_URL": f"sqlite:///{directory / 'mailfathom.db'}",
        "NO_COLOR": "1",
    }


def run_page(blocks: list[Block], directory: Path, timeout: float = 60) -> str:
    """Run one page's blocks in ``directory``; returns their output, raises when one fails."""
    installing = [f"{block.page}:{block.line}" for block in blocks if block.installs]
    if installing:
        raise AssertionError(
            f"{', '.join(installing)} would install packages into the test's venv: put "
            "<!-- skip: installs ... --> on the line before the block"
        )
    runnable = [asdict(block) for block in blocks if block.runs]
    spec = directory / ".snippets.json"
    spec.write_text(json.dumps(runnable), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(spec)],
        cwd=directory,
        env=prepare(directory),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    if done.returncode:
        raise AssertionError(f"a snippet failed (exit {done.returncode}):\n{output}")
    return output
