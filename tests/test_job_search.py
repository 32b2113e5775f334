"""Text search over jobs finds the same jobs on SQLite and PostgreSQL.

Every case below runs on both dialects (the ``mf`` fixture) against the same
expected answer: search covers the failure reason, the idempotency key and the
payload's keys and string and number values, ignoring ASCII case only, never
the JSON text a dialect happens to store.
"""

from __future__ import annotations

import pytest

from mailfathom import MailFathom

PAYLOAD = {
    "city": "Zürich",
    "count": 42,
    "ratio": 1.5,
    "tags": ["Café", {"deep": "needle"}],
    "flag": True,
    "quote": 'say "hi"',
    "gone": None,
}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("zürich", ["rich"]),  # ASCII letters fold, ü is matched as written
        ("ZÜRICH", []),  # non-ASCII letters do not fold, on either dialect
        ("café", ["rich"]),
        ("NEEDLE", ["rich"]),  # a string nested in an array in an object
        ("Deep", ["rich"]),  # an object key, nested
        ("42", ["rich"]),  # numbers as written
        ("1.5", ["rich"]),
        ('say "hi"', ["rich"]),  # quotes as in the value, not JSON-escaped
        ('"city"', []),  # JSON syntax is not searched
        ('":', []),
        ("true", []),  # booleans and nulls are not values to search
        ("null", []),
        ("ORDER-X", ["plain"]),  # the idempotency key
        ("x", ["plain"]),
    ],
)
def test_text_search_is_the_same_on_every_dialect(
    mf: MailFathom, text: str, found: list[str]
) -> None:
    jobs = {
        "rich": mf.enqueue("k", PAYLOAD).id,
        "plain": mf.enqueue("k", {"other": "y"}, idempotency_key="order-x").id,
    }
    names = {job_id: name for name, job_id in jobs.items()}
    assert [names[job.id] for job in mf.jobs.list(text=text)] == found
