"""``mutants/run.py --check`` (run by ``make test``): the mutation list stays in step
with the code: every edit still applies exactly once, every listed test file exists, and
a broken entry is reported by name without running any test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
[[mutation]]
name = "fine"
guarantee = "applies once"
tests = ["tests/test_thing.py::test_it"]
[[mutation.edit]]
file = "src/thing.py"
original = "LIMIT = 5"
replacement = "LIMIT = 6"
"""

BROKEN = """
[[mutation]]
name = "text-gone"
guarantee = "its original text was edited away"
tests = ["tests/test_thing.py"]
[[mutation.edit]]
file = "src/thing.py"
original = "LIMIT = 7"
replacement = "LIMIT = 8"

[[mutation]]
name = "text-twice"
guarantee = "its original text occurs twice"
tests = ["tests/test_thing.py"]
[[mutation.edit]]
file = "src/thing.py"
original = "return"
replacement = "yield"

[[mutation]]
name = "test-file-gone"
guarantee = "its test file was renamed"
tests = ["tests/test_renamed.py::test_it"]
[[mutation.edit]]
file = "src/thing.py"
original = "LIMIT = 5"
replacement = "LIMIT = 4"

[[mutation]]
name = "test-renamed"
guarantee = "its test function was renamed"
tests = ["tests/test_thing.py::test_old_name[sqlite]"]
[[mutation.edit]]
file = "src/thing.py"
original = "LIMIT = 5"
replacement = "LIMIT = 3"

[[mutation]]
name = "source-gone"
guarantee = "its source file was moved"
tests = ["tests/test_thing.py"]
[[mutation.edit]]
file = "src/moved.py"
original = "LIMIT = 5"
replacement = "LIMIT = 4"
"""


def _tree(tmp_path: Path, entries: str) -> Path:
    """A tree shaped like the project's: mutants/run.py, its list, a source, a test."""
    (tmp_path / "mutants").mkdir()
    shutil.copy2(ROOT / "mutants" / "run.py", tmp_path / "mutants" / "run.py")
    (tmp_path / "mutants" / "mutations.toml").write_text(entries, encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "thing.py").write_text(
        "LIMIT = 5\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n", encoding="utf-8"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_thing.py").write_text("def test_it():\n    assert False\n")
    return tmp_path


def _check(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(tree / "mutants" / "run.py"), "--check"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_projects_list_applies_to_the_current_code() -> None:
    done = _check(ROOT)
    assert done.returncode == 0, done.stderr
    assert "mutations apply to the current code" in done.stdout


def test_a_list_in_step_passes_without_running_a_test(tmp_path: Path) -> None:
    tree = _tree(tmp_path, GOOD)
    done = _check(tree)
    assert done.returncode == 0, done.stderr
    # The guarding test fails on purpose: --check never ran it.
    assert done.stdout.strip() == "mutants: 1 mutations apply to the current code"
    assert (tree / "src" / "thing.py").read_text(encoding="utf-8").startswith("LIMIT = 5\n")


def test_each_broken_entry_is_reported_by_name(tmp_path: Path) -> None:
    tree = _tree(tmp_path, GOOD + BROKEN)
    done = _check(tree)
    assert done.returncode == 1
    problems = [line.strip() for line in done.stderr.splitlines()[1:]]
    assert done.stderr.splitlines()[0] == "mutants: the list is out of step with the code:"
    assert sorted(p.split(":", 1)[0] for p in problems) == [
        "source-gone",
        "test-file-gone",
        "test-renamed",
        "text-gone",
        "text-twice",
    ]
    by_name = {p.split(":", 1)[0]: p for p in problems}
    assert "0 times" in by_name["text-gone"]
    assert "2 times" in by_name["text-twice"]
    assert "'tests/test_renamed.py' does not exist" in by_name["test-file-gone"]
    assert "src/moved.py does not exist" in by_name["source-gone"]
    assert "tests/test_thing.py defines no test 'test_old_name'" in by_name["test-renamed"]
    assert done.stdout == ""


def test_a_malformed_list_is_reported(tmp_path: Path) -> None:
    tree = _tree(tmp_path, GOOD + GOOD)
    done = _check(tree)
    assert done.returncode == 1
    assert "names used twice" in done.stderr
    assert "fine" in done.stderr
