# mailfathom — developer commands. `make test` is what CI runs.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: test lint types pytest venv run clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

lint: venv
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples

types: venv
	$(VENV)/bin/mypy

pytest: venv
	$(VENV)/bin/pytest

## The README's test command: lint, types, then the whole suite.
test: lint types pytest

## Run an example worker against the default SQLite database (migrated first).
run: venv
	$(VENV)/bin/mailfathom migrate
	$(VENV)/bin/mailfathom worker --app examples.app:mf

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
