"""Fixtures shared by the whole suite: one store fixture parametrised over every database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mailfathom import FakeClock, MailFathom

STORES = ["sqlite"]


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty database of each kind."""
    path = tmp_path_factory.mktemp("db") / "mailfathom.db"
    return f"sqlite:///{path}"


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def mf(database_url: str, clock: FakeClock) -> Iterator[MailFathom]:
    """A migrated app on a fresh database, with the fake clock."""
    app = MailFathom(database_url, clock=clock)
    app.migrate()
    yield app
    app.close()
