"""Storage: the ``Store`` facade and the repositories behind it.

Internal. ``open_store(url)`` picks the store from the database URL:
``sqlite:///path/to.db`` or ``postgresql://…``.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

from mailfathom.clock import DEFAULT_CLOCK_SKEW, Clock
from mailfathom.errors import ConfigurationError
from mailfathom.store.protocol import Store
from mailfathom.store.sql_store import SqlStore
from mailfathom.store.sqlite import SQLiteDatabase

__all__ = ["Store", "open_store", "redact_url"]


def open_store(
    url: str,
    *,
    clock_skew: timedelta = DEFAULT_CLOCK_SKEW,
    sqlite_busy_timeout: float = 30.0,
    enqueue_timeout: float | None = None,
    database_clock: Clock | None = None,
) -> SqlStore:
    """The store for ``url``; a URL of any other scheme is refused with the ones we take.

    ``clock_skew`` is how long after its end a lease still counts as live;
    ``sqlite_busy_timeout`` and ``enqueue_timeout`` are the settings of those names.
    ``database_clock`` stands in for the database's clock, which rate windows are judged
    on (None: the database's own)."""
    scheme = urlsplit(url).scheme if "://" in url else ""
    if scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ConfigurationError(
                f"database_url {redact_url(url)!r} has no file path: write "
                "sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        database = SQLiteDatabase(path, busy_timeout=sqlite_busy_timeout)
        return SqlStore(
            database,
            clock_skew=clock_skew,
            enqueue_timeout=enqueue_timeout,
            database_clock=database_clock,
        )
    if scheme in ("postgresql", "postgres"):
        # here, not at the top: psycopg (~0.4 s to import) loads for PostgreSQL URLs only
        from mailfathom.store.postgres import PostgresDatabase

        return SqlStore(
            PostgresDatabase(url),
            clock_skew=clock_skew,
            enqueue_timeout=enqueue_timeout,
            database_clock=database_clock,
        )
    raise ConfigurationError(
        f"database_url {redact_url(url)!r} is not supported: use sqlite:///path/to.db "
        "or postgresql://user@host/dbname"
    )


_SECRET_OPTIONS = frozenset({"password", "sslpassword"})


def redact_url(url: str) -> str:
    """``url`` with every password replaced by ``***``, safe to log or show.

    Masks the password in ``user:password@`` and the value of a ``password=`` (or
    ``sslpassword=``) option in the query. Text that does not parse as a URL (no
    scheme, a bad port: a password with an unencoded ``/`` or ``#``) keeps only
    its scheme and what follows its last ``@``.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port is a ValueError: mask it all
    except ValueError:
        parts = None
    if parts is None or "://" not in url:
        if "@" not in url and parts is not None:
            return url
        scheme = url.partition("://")[0] + "://" if "://" in url else ""
        return f"{scheme}***" + (url[url.rindex("@") :] if "@" in url else "")
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    pairs = parts.query.split("&") if parts.query else []
    query = "&".join(
        f"{pair.partition('=')[0]}=***"
        if pair.partition("=")[0].lower() in _SECRET_OPTIONS
        else pair
        for pair in pairs
    )
    if netloc == parts.netloc and query == parts.query:
        return url
    return parts._replace(netloc=netloc, query=query).geturl()
