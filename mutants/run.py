"""``make mutants``: break each guarantee on purpose and check that its tests notice.

Every entry of ``mutants/mutations.toml`` names a guarantee of docs/state-machines.md or
docs/outbox.md, one or more source edits that break it (a file, text that must occur
in it exactly once, and its replacement) and the tests that claim to guard it. For each
entry this script copies the tree to a temporary directory, applies the edits there
(never to the working tree), runs the guarding tests against the copy's ``src`` and
reports KILLED (the tests failed: good) or SURVIVED (they passed: the guarantee rests
on nothing). A baseline first checks that the same tests pass on the unmutated copy, so
a kill means the mutation, not a broken test.

Exit status: 0 when every mutation is killed; 1 when any survives or errors (an edit
whose text is not found exactly once, a selection that collects nothing, a timeout).

    python mutants/run.py             # everything, one mutation at a time
    python mutants/run.py --list      # the entries, without running anything
    python mutants/run.py --only NAME # one entry (repeatable)
    python mutants/run.py --check     # the list against the code only (``make test``)

``--check`` runs no test: it loads the list, checks that every edit still applies
exactly once to the current code, that every listed test file exists and holds the
test function a node id names, and exits 1 naming each entry that does not (cheap
enough for every ``make test``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = Path(__file__).resolve().parent / "mutations.toml"
# What a test run needs from the tree (docs for the pages some tests read).
COPIED = ("src", "tests", "bench", "examples", "docs", "pyproject.toml", "README.md")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".peers", "screenshots", "*.db*")
PYTEST_OPTIONS = ("-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly")
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Edit:
    """Replace ``original`` (which must occur exactly once in ``file``) by ``replacement``."""

    file: str
    original: str
    replacement: str


@dataclass(frozen=True)
class Mutation:
    """One way of breaking one guarantee, and the tests that must notice."""

    name: str
    guarantee: str
    tests: tuple[str, ...]
    keyword: str | None
    edits: tuple[Edit, ...]
    timeout: float

    def selection(self) -> tuple[str, ...]:
        """The pytest arguments choosing the guarding tests."""
        return self.tests + (("-k", self.keyword) if self.keyword else ())


class ListError(Exception):
    """The list is out of step with the code (or malformed): fix mutants/mutations.toml."""


def load(path: Path = LIST) -> list[Mutation]:
    """Every mutation of the list, in order, with each field checked."""
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    mutations: list[Mutation] = []
    for entry in data.get("mutation", []):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ListError(f"an entry of {path} has no name: {entry!r}")
        tests = entry.get("tests")
        edits = entry.get("edit")
        if not tests or not isinstance(tests, list) or not edits:
            raise ListError(f"{name}: give `tests = [...]` and at least one [[mutation.edit]]")
        mutations.append(
            Mutation(
                name=name,
                guarantee=str(entry.get("guarantee", "")),
                tests=tuple(tests),
                keyword=entry.get("k"),
                edits=tuple(
                    Edit(file=e["file"], original=e["original"], replacement=e["replacement"])
                    for e in edits
                ),
                timeout=float(entry.get("timeout", DEFAULT_TIMEOUT)),
            )
        )
    names = [m.name for m in mutations]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ListError(f"names used twice in {path}: {', '.join(duplicates)}")
    return mutations


def check_edits(tree: Path, mutations: list[Mutation]) -> list[str]:
    """Why each edit cannot apply to ``tree`` (its text is not there exactly once)."""
    problems: list[str] = []
    for mutation in mutations:
        for edit in mutation.edits:
            target = tree / edit.file
            if not target.is_file():
                problems.append(f"{mutation.name}: {edit.file} does not exist")
                continue
            count = target.read_text(encoding="utf-8").count(edit.original)
            if count != 1:
                problems.append(
                    f"{mutation.name}: {edit.file} holds the original text {count} times "
                    f"(must be exactly once): {edit.original[:70]!r}"
                )
            if edit.original == edit.replacement:
                problems.append(f"{mutation.name}: an edit of {edit.file} changes nothing")
    return problems


def check_tests(tree: Path, mutations: list[Mutation]) -> list[str]:
    """Why each listed test cannot be run in ``tree``: its file does not exist, or the
    test function a node id names is not in it (renamed or removed; a test the file
    imports from another counts)."""
    problems: list[str] = []
    for mutation in mutations:
        for test in mutation.tests:
            path, _, rest = test.partition("::")
            target = tree / path
            if not path or not target.exists():
                problems.append(f"{mutation.name}: the test file {path!r} does not exist")
                continue
            function = rest.rpartition("::")[2].partition("[")[0]
            if function and target.is_file():
                text = target.read_text(encoding="utf-8")
                if not re.search(rf"\b{re.escape(function)}\b", text):  # defined or imported
                    problems.append(f"{mutation.name}: {path} defines no test {function!r}")
    return problems


def check(tree: Path, path: Path = LIST) -> list[str]:
    """Everything that keeps the list at ``path`` from running on ``tree`` (empty: fine)."""
    try:
        mutations = load(path)
    except (ListError, tomllib.TOMLDecodeError, KeyError) as exc:
        return [f"{path}: {exc}"]
    return check_edits(tree, mutations) + check_tests(tree, mutations)


def copy_tree(into: Path) -> Path:
    """A fresh copy of what the tests need, under ``into``."""
    tree = into / "tree"
    tree.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=IGNORED)
        elif source.is_file():
            shutil.copy2(source, tree / name)
    return tree


def apply(tree: Path, mutation: Mutation) -> None:
    """Apply every edit of ``mutation`` to ``tree`` (already checked to apply once)."""
    for edit in mutation.edits:
        target = tree / edit.file
        text = target.read_text(encoding="utf-8")
        if text.count(edit.original) != 1:  # the check ran on ROOT; the copy must agree
            raise ListError(f"{mutation.name}: {edit.file} changed under the run")
        target.write_text(text.replace(edit.original, edit.replacement), encoding="utf-8")


def run_tests(tree: Path, selection: tuple[str, ...], timeout: float) -> tuple[str, int, str]:
    """Run pytest in ``tree`` on its own ``src``: (verdict, exit code, last output lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *selection]
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "timeout", -1, f"no result within {timeout:.0f} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    tail = "\n".join(failed[:1] or lines[-6:])
    verdict = {0: "passed", 1: "failed"}.get(done.returncode, "error")
    return verdict, done.returncode, tail


def imports_from(tree: Path) -> str:
    """Where ``import mailfathom`` resolves in a run on ``tree`` (must be inside it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree / "src")
    done = subprocess.run(
        [sys.executable, "-c", "import mailfathom; print(mailfathom.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


#: Test node ids the baseline runs in one pytest process.
BASELINE_GROUP = 60


def baseline(mutations: list[Mutation]) -> list[str]:
    """Problems found running each distinct test selection on the unmutated copy."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mf-mutants-") as scratch:
        tree = copy_tree(Path(scratch))
        where = imports_from(tree)
        if not where.startswith(str(tree)):
            return [f"the copy imports mailfathom from {where}, not from {tree}/src"]
        seen: set[tuple[str, ...]] = set()
        plain = sorted({t for m in mutations if not m.keyword for t in m.tests})
        # in groups, each under the usual time limit: one run of every guarding test
        # would outgrow any fixed limit as the list grows (and on a loaded machine)
        selections = [
            tuple(plain[start : start + BASELINE_GROUP])
            for start in range(0, len(plain), BASELINE_GROUP)
        ]
        selections += [m.selection() for m in mutations if m.keyword]
        for selection in selections:
            if selection in seen:
                continue
            seen.add(selection)
            started = time.monotonic()
            verdict, code, tail = run_tests(tree, selection, DEFAULT_TIMEOUT * 2)
            took = time.monotonic() - started
            shown = " ".join(selection) if len(selection) < 6 else f"{len(selection)} node ids"
            print(f"baseline {verdict} in {took:.0f} s: {shown}", flush=True)
            if verdict != "passed":
                problems.append(f"baseline {verdict} (exit {code}) for {selection}:\n{tail}")
    return problems


def run(mutations: list[Mutation]) -> list[tuple[Mutation, str, float, str]]:
    """Each mutation on its own fresh copy, one at a time: (mutation, result, seconds, tail)."""
    results: list[tuple[Mutation, str, float, str]] = []
    for index, mutation in enumerate(mutations, 1):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="mf-mutant-") as scratch:
            tree = copy_tree(Path(scratch))
            apply(tree, mutation)
            verdict, code, tail = run_tests(tree, mutation.selection(), mutation.timeout)
        took = time.monotonic() - started
        result = {"failed": "KILLED", "passed": "SURVIVED"}.get(verdict, f"ERROR ({verdict})")
        if verdict == "error":
            result = f"ERROR (pytest exit {code})"
        print(f"[{index}/{len(mutations)}] {result:<10} {took:5.0f} s  {mutation.name}", flush=True)
        print("    " + tail[:300].replace("\n", "\n    "), flush=True)
        results.append((mutation, result, took, tail))
    return results


def table(results: list[tuple[Mutation, str, float, str]]) -> str:
    """The results as a Markdown table (name, result, seconds, guarantee, tests)."""
    lines = [
        "| mutation | result | s | guarantee | guarding tests |",
        "|---|---|---|---|---|",
    ]
    for mutation, result, took, _ in results:
        tests = " ".join(mutation.tests) + (f" -k {mutation.keyword!r}" if mutation.keyword else "")
        lines.append(
            f"| {mutation.name} | {result} | {took:.0f} | {mutation.guarantee} | {tests} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the list against the code, run, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="show the mutations and stop")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only NAME")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline run")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that every edit applies exactly once and every test file exists",
    )
    options = parser.parse_args(argv)
    if options.check:
        problems = check(ROOT)
        if problems:
            print("mutants: the list is out of step with the code:", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
            return 1
        print(f"mutants: {len(load())} mutations apply to the current code")
        return 0
    try:
        mutations = load()
    except (ListError, tomllib.TOMLDecodeError, KeyError) as exc:
        print(f"mutants: {LIST}: {exc}", file=sys.stderr)
        return 1
    problems = check_edits(ROOT, mutations) + check_tests(ROOT, mutations)
    if problems:
        print("mutants: the list is out of step with the code:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    if options.list:
        for mutation in mutations:
            print(f"{mutation.name}\n    {mutation.guarantee}")
            print(f"    tests: {' '.join(mutation.selection())}")
        return 0
    if options.only:
        unknown = sorted(set(options.only) - {m.name for m in mutations})
        if unknown:
            print(f"mutants: no mutation named {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 1
        mutations = [m for m in mutations if m.name in options.only]
    started = time.monotonic()
    if not options.no_baseline:
        problems = baseline(mutations)
        if problems:
            print("mutants: the guarding tests fail without any mutation:", file=sys.stderr)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1
    results = run(mutations)
    print()
    print(table(results))
    alive = [m.name for m, result, _, _ in results if result != "KILLED"]
    print(f"\n{len(results) - len(alive)} of {len(results)} killed in ", end="")
    print(f"{time.monotonic() - started:.0f} s")
    if alive:
        print(f"not killed: {', '.join(alive)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
