# mailfathom — developer commands. `make test` is what CI runs.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: test test-slow test-all lint types pytest venv run screenshots bench docs docs-serve clean mutants mutants-check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

## Style, formatting, and the import contract: layers point one way, no import circles
## ([tool.importlinter] in pyproject.toml).
lint: venv
	$(VENV)/bin/ruff check src tests bench examples docs_hooks
	$(VENV)/bin/ruff format --check src tests bench examples docs_hooks
	$(VENV)/bin/lint-imports --no-cache

types: venv
	$(VENV)/bin/mypy

## Both cores: test files are spread over two processes (each file stays in one).
## The slow crash and multi-process tests (marked `slow`) are left to `make test-slow`.
pytest: venv
	$(VENV)/bin/pytest -n 2 --dist loadfile -m "not slow"

## The mutation list against the code, without running a test: every edit of
## mutants/mutations.toml still applies exactly once and every listed test file exists.
mutants-check: venv
	$(PY) mutants/run.py --check

## The README's test command: lint, types, the mutation list, then the suite without the
## slow tests.
test: lint types mutants-check pytest

## The crash and multi-process tests (SIGKILL, several workers, database restarts).
## CI (.ci/run) runs them after `make test`.
test-slow: venv
	$(VENV)/bin/pytest -n 2 --dist loadfile -m slow

## Everything CI runs: `make test`, then the slow tests.
test-all: test test-slow

## Break each guarantee on purpose (mutants/mutations.toml) and check that its tests notice.
## Not part of `make test`. MUTANTS_ARGS="--only NAME" runs one; "--list" shows them all.
mutants: venv
	$(PY) mutants/run.py $(MUTANTS_ARGS)

## The quick start: console, worker and capture SMTP server for the example app (mailfathom dev).
run: venv
	$(VENV)/bin/mailfathom dev --app examples.app:mf

## Screenshots of every console page (headless Chromium) into docs/screenshots/.
screenshots: venv
	MAILFATHOM_SCREENSHOTS=$(CURDIR)/docs/screenshots $(VENV)/bin/pytest -q tests/test_browser.py tests/test_browser_dev.py tests/test_browser_limits.py -p no:cacheprovider

## The benchmark side by side with the peers (installs them into bench/.peers/venv, the
## Django email peers into bench/.peers/django-venv).
## BENCH_ARGS="--full --rounds 3" for the sizes of the published table; see docs/benchmarks.md.
bench: venv
	$(PY) -m bench $(BENCH_ARGS)

## The documentation site (MkDocs + Material + mkdocstrings) into site/; --strict: a broken
## link, anchor or reference fails the build. docs-serve: a live preview on 127.0.0.1:8000.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
