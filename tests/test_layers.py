"""The layers point one way: the import contract of `make lint` holds, and it catches an
upward import; an import inside a function says why it is not at the top.

The contract is ``[tool.importlinter]`` in pyproject.toml, checked by ``lint-imports``.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.jobs.state import JobState
from mailfathom.observability import gauges

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mailfathom"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(source: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contract, on the package under ``source``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(source)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy_with(tmp_path: Path, module: str, added: str) -> Path:
    """A copy of the package's source in which ``module`` (a path under the package)
    also runs the line ``added`` at import."""
    source = tmp_path / "src"
    shutil.copytree(PACKAGE, source / "mailfathom", ignore=shutil.ignore_patterns("__pycache__"))
    target = source / "mailfathom" / module
    target.write_text(target.read_text() + f"\n{added}\n")
    return source


def test_the_import_contract_holds() -> None:
    """Every contract is kept on the code as it is (the step `make lint` runs)."""
    done = _lint_imports(ROOT / "src", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "added", "broken"),
    [
        # storage deciding delivery policy again
        ("store/outbox/records.py", "import mailfathom.delivery.domains", "The store imports"),
        # observability reaching the app at run time (not only for annotations)
        ("observability/server.py", "import mailfathom.app", "Observability runs without"),
        # a job module reaching the console, a layer above it
        ("jobs/state.py", "import mailfathom.console.query", "Layers point one way"),
        # a circle between two modules of one package, even through a function
        (
            "jobs/retry.py",
            "def _late() -> None:\n    import mailfathom.jobs.registry",
            "No import circles",
        ),
    ],
)
def test_the_contract_breaks_on_an_upward_import(
    tmp_path: Path, module: str, added: str, broken: str
) -> None:
    """A new import that points up (or closes a circle) fails the lint step, naming the
    contract it breaks."""
    done = _lint_imports(_copy_with(tmp_path, module, added), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = done.stdout.split("Broken contracts", 1)[1]
    assert broken in failed, done.stdout


def test_an_import_inside_a_function_says_why() -> None:
    """Imports belong at the top of a module; each one kept inside a function (an optional
    dependency, a slow import for one command only) has a comment saying why."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = lines[node.lineno - 1 : node.end_lineno]
            explained = any("# here" in line for line in body)
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) and not explained:
                    unexplained.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert unexplained == []


def test_the_gauge_labels_are_the_stored_states_and_stages() -> None:
    """The database gauges name job states and email stages without importing the layers
    that define them: their labels are exactly the stored values."""
    states = {state.value for state in JobState}
    assert set(gauges._STATES) | set(gauges._HISTORY) == states
    assert not set(gauges._STATES) & set(gauges._HISTORY)
    assert [stage.value for stage in OutgoingEmailStage] == gauges._STAGES
