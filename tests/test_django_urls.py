"""How a PostgreSQL ``DATABASES`` entry becomes mailfathom's URL (no database needed):
what Django's own connections use, mailfathom's use too."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from mailfathom.contrib.django.conf import _postgres_url


def _entry(**given: Any) -> dict[str, Any]:
    return {"NAME": "", "USER": "", "PASSWORD": "", "HOST": "", "PORT": "", "OPTIONS": {}, **given}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            _entry(NAME="shop", USER="app", PASSWORD="p@ss:w/rd?", HOST="db.internal", PORT=6432),
            {
                "dbname": "shop",
                "user": "app",
                "password": "p@ss:w/rd?",
                "host": "db.internal",
                "port": "6432",
            },
        ),
        (
            _entry(NAME="shop", HOST="/var/run/postgresql"),
            {"dbname": "shop", "host": "/var/run/postgresql"},
        ),
        (_entry(NAME="shop", HOST="::1"), {"dbname": "shop", "host": "::1"}),
        (
            _entry(
                NAME="shop",
                OPTIONS={
                    "options": "-c search_path=app,public",
                    "sslmode": "require",
                    "isolation_level": 3,  # Django's own: not for libpq
                    "server_side_binding": True,
                    "pool": {"min_size": 2},
                },
            ),
            {"dbname": "shop", "options": "-c search_path=app,public", "sslmode": "require"},
        ),
        (_entry(), {"dbname": "postgres"}),
    ],
)
def test_a_postgresql_alias_gives_the_same_connection_parameters(
    entry: dict[str, Any], expected: dict[str, str]
) -> None:
    url = _postgres_url(entry)
    assert url.startswith("postgresql://")
    assert conninfo_to_dict(url) == expected
