"""``connection=`` on a connection whose driver is configured as a framework configures it.

Django opens its psycopg connections with its own loaders (``jsonb`` as text,
``timestamptz`` in its time zone) and a client-side-binding cursor class, and its
sqlite3 connections with ``detect_types`` and the default tuple rows. Recording an
email and enqueueing a job on such a connection must read back what it wrote as
mailfathom's own connections do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC
from email.message import EmailMessage
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.string import TextLoader

from mailfathom import MailFathom


class _TokyoLoader(TimestamptzLoader):
    """timestamptz read in another time zone, as Django's loader does for its TIME_ZONE."""

    def load(self, data: Any) -> Any:
        return super().load(data).astimezone(ZoneInfo("Asia/Tokyo"))


@pytest.fixture
def framework_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """A connection set up the way Django sets up its own."""
    conn: Any
    if mf.store.dialect == "sqlite":
        conn = sqlite3.connect(
            database_url.removeprefix("sqlite:///"),
            detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
            check_same_thread=False,
        )
    else:
        conn = psycopg.connect(database_url, cursor_factory=psycopg.ClientCursor)
        conn.adapters.register_loader("jsonb", TextLoader)
        conn.adapters.register_loader("json", TextLoader)
        conn.adapters.register_loader("timestamptz", _TokyoLoader)
    yield conn
    conn.close()


def test_record_and_enqueue_read_back_on_a_framework_connection(
    mf: MailFathom, framework_conn: Any
) -> None:
    message = EmailMessage()
    message["From"] = "app@example.com"
    message["To"] = "ann@example.com, bob@example.com"
    message["Subject"] = "Hello"
    message.set_content("Hello.")
    recorded = mf.outbox.record(message, idempotency_key="hello", connection=framework_conn)
    job = mf.enqueue("reports.build", {"report": 7}, connection=framework_conn)
    assert [r.address for r in recorded.recipients] == ["ann@example.com", "bob@example.com"]
    assert job.payload == {"report": 7}
    assert job.created_at.tzinfo is UTC
    framework_conn.commit()
    assert mf.outbox.get(recorded.id).subject == "Hello"
    assert mf.jobs.get(job.id).payload == {"report": 7}
