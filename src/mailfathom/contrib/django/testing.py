"""Tests of a Django project with mailfathom: an empty queue and outbox for each test.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Django's test cases empty the tables of the project's models between tests (a
rollback, or ``flush`` for ``TransactionTestCase`` and pytest-django's
``transactional_db``); mailfathom's tables are not models, so their rows would
outlive the test that wrote them. :func:`empty_tables` deletes them — on a test
database only (docs/testing.md, "Django, with pytest-django").
"""

from __future__ import annotations

from django.core import mail
from django.db import connections

from mailfathom.contrib.django.app import config
from mailfathom.errors import ConfigurationError

__all__ = ["empty_tables"]

#: mailfathom's tables whose rows are its schema's own, not data: kept.
_KEPT = frozenset({"mf_migrations", "mf_pruner"})


def empty_tables(using: str | None = None) -> list[str]:
    """Delete every job, email, event, worker, schedule and limit row from mailfathom's
    tables on ``using`` (default: mailfathom's alias); the schema stays migrated.
    Returns the tables emptied.

    Refused outside Django's test environment (``setup_test_environment``, which
    Django's runner and pytest-django call), so it never empties a real database.
    """
    if not hasattr(mail, "outbox"):
        raise ConfigurationError(
            "empty_tables() runs only in Django's test environment (manage.py test or "
            "pytest-django), where the database is a test database"
        )
    connection = connections[using or config().alias]
    tables = sorted(
        name
        for name in connection.introspection.table_names()
        if name.startswith("mf_") and name not in _KEPT
    )
    if not tables:
        return []
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {', '.join(map(quote, tables))} CASCADE")
        else:
            cursor.execute("PRAGMA foreign_keys = OFF")  # any order; nothing is left over
            try:
                for table in tables:
                    cursor.execute(f"DELETE FROM {quote(table)}")
            finally:
                cursor.execute("PRAGMA foreign_keys = ON")
    return tables
