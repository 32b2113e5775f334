"""PostgreSQL URLs: checked when the app is built, and ``connect_timeout`` bounds waiting."""

from __future__ import annotations

import pytest

from mailfathom import ConfigurationError, MailFathom
from mailfathom.store.postgres import PostgresDatabase


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@127.0.0.1/db?colour=blue", r'not a valid PostgreSQL URL \(.*"colour"\)'),
        ("postgresql://u@127.0.0.1/db?connect_timeout=soon", "connect_timeout='soon'"),
    ],
)
def test_a_malformed_url_is_refused_at_once(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MailFathom(url)


@pytest.mark.parametrize(
    ("url", "seconds"),
    [
        ("postgresql://u@127.0.0.1/db", 10.0),
        ("postgresql://u@127.0.0.1/db?connect_timeout=3", 3.0),
        ("postgres://u@127.0.0.1/db?connect_timeout=0", 10.0),  # libpq: 0 means no limit
    ],
)
def test_connect_timeout_bounds_the_wait_for_a_connection(url: str, seconds: float) -> None:
    database = PostgresDatabase(url)
    assert database.pool_timeout == seconds
    database.close()
