"""A payload comes back exactly as it went in, or is refused naming where and why.

Exactly: the same Python types and values at every depth (``-0.0`` stays ``-0.0``,
``1e16`` stays a float, big integers stay integers), object keys in the same
order, on every store and through every write path (one job, a batch, a
schedule's tick, a claim). Anything that would come back different is refused
with :class:`PayloadError` naming its path, and nothing is written.
"""

from __future__ import annotations

import enum
import math
import re
from collections import OrderedDict
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailfathom import FakeClock, MailFathom, PayloadError
from mailfathom.jobs.payload import MAX_DEPTH, MAX_INT_DIGITS
from mailfathom.jobs.schedules.schedules import Scheduler
from mailfathom.store.migrate import load_migrations
from mailfathom.testing import claim

TRICKY: dict[str, Any] = {
    "z": 1e16,
    "big float": 1.5e20,
    "negative zero": -0.0,
    "a": 1.0,
    "tiny": 5e-324,
    "huge int": 2**70,
    "negative huge int": -(10**40),
    "false": False,
    "zero": 0,
    "astral": "🚀 𝄞 \U0010fffd",
    "escapes": 'quote " backslash \\ tab \t newline \n \x7f \u2028',
    "nested": {"b": [1, 1.0, -0.0, [], {}, [None, True]], "a": {"y": 2, "x": 1}},
    "": "empty key",
}


def same(got: object, want: object) -> bool:
    """Equal with identical types at every depth, floats by their repr (so -0.0 is not
    0.0) and dict keys in the same order."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        assert isinstance(got, dict)
        return list(got) == list(want) and all(same(got[key], want[key]) for key in want)
    if isinstance(want, list):
        assert isinstance(got, list)
        return len(got) == len(want) and all(same(a, b) for a, b in zip(got, want, strict=True))
    if isinstance(want, float):
        return repr(got) == repr(want)
    return got == want


def total(mf: MailFathom) -> int:
    return sum(mf.jobs.counts().values())


# -- exact round trips ----------------------------------------------------------------


def test_tricky_numbers_and_key_order_come_back_exactly(mf: MailFathom) -> None:
    one = mf.enqueue("k", TRICKY)
    assert same(one.payload, TRICKY), one.payload
    assert same(mf.jobs.get(one.id).payload, TRICKY), mf.jobs.get(one.id).payload
    batch = mf.enqueue_many("k", [TRICKY, {"n": -0.0}, TRICKY])  # PostgreSQL: one statement
    got = [mf.jobs.get(job.id).payload for job in batch]
    assert same(got, [TRICKY, {"n": -0.0}, TRICKY]), got
    assert same([job.payload for job in batch], [TRICKY, {"n": -0.0}, TRICKY])
    claimed = claim(mf, "w", 10, timedelta(seconds=30))
    assert len(claimed) == 4
    assert all(same(job.payload, mf.jobs.get(job.id).payload) for job in claimed)


def test_the_largest_integer_accepted_comes_back(mf: MailFathom) -> None:
    largest = 10**MAX_INT_DIGITS - 1
    job = mf.enqueue("k", {"n": largest, "m": [-largest]})
    assert same(mf.jobs.get(job.id).payload, {"n": largest, "m": [-largest]})


def test_a_payload_nested_to_the_limit_comes_back(mf: MailFathom) -> None:
    deep: Any = 1
    for level in range(MAX_DEPTH - 1):  # the payload object itself is the first level
        deep = [deep] if level % 2 else {"d": deep}
    job = mf.enqueue("k", {"d": deep})
    assert same(mf.jobs.get(job.id).payload, {"d": deep})


def test_a_scheduled_job_gets_the_declared_payload_exactly(
    mf: MailFathom, clock: FakeClock
) -> None:
    mf.schedule("s", cron="* * * * *", kind="k", payload=TRICKY)
    assert mf.schedules.sync() == ["s"]
    assert same(mf.schedules.get("s").payload, TRICKY), mf.schedules.get("s").payload
    assert mf.schedules.sync() == []  # unchanged: nothing written
    clock.advance(timedelta(minutes=1))
    assert Scheduler(mf.queue, clock).run_due()[0] == 1
    (job,) = mf.jobs.list(kind="k")
    assert same(job.payload, TRICKY), job.payload


# hypothesis: JSON values that must round-trip exactly. The example counts are moderate
# and every example reuses the test's one database (hence the health-check suppression).
_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**MAX_INT_DIGITS - 1), max_value=10**MAX_INT_DIGITS - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([-0.0, 0.0, 1e16, 1.5e20, 5e-324, 1.7976931348623157e308, 2.0**63])
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_PAYLOADS = st.dictionaries(_TEXT, _VALUES, max_size=5)
_EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_EXAMPLES
@given(payload=_PAYLOADS)
def test_any_json_payload_round_trips_through_one_enqueue(
    mf: MailFathom, payload: dict[str, Any]
) -> None:
    job = mf.enqueue("k", payload)
    assert same(job.payload, payload), job.payload
    stored = mf.jobs.get(job.id).payload
    assert same(stored, payload), stored


@_EXAMPLES
@given(payloads=st.lists(_PAYLOADS, min_size=2, max_size=4))
def test_any_json_payloads_round_trip_through_a_batch(
    mf: MailFathom, payloads: list[dict[str, Any]]
) -> None:
    jobs = mf.enqueue_many("k", payloads)
    assert same([job.payload for job in jobs], payloads)
    stored = [mf.jobs.get(job.id).payload for job in jobs]
    assert same(stored, payloads), stored


# -- refusals: the path named, what to do said, nothing written ------------------------


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def _circular() -> dict[str, Any]:
    loop: list[Any] = []
    loop.append(loop)
    return {"loop": loop}


def _too_deep() -> dict[str, Any]:
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    return {"d": deep}


REFUSED: list[tuple[str, object, str]] = [
    ("nested int key", {"a": {1: "x", "1": "y"}}, r"payload\['a'\]\[1\]: keys must be strings"),
    ("top-level int key", {1: "x"}, r"payload\[1\]: keys must be strings"),
    ("None key", {"a": [{None: 1}]}, r"payload\['a'\]\[0\]\[None\]: keys must be strings"),
    ("str subclass key", {Name("n"): 1}, r"payload\['n'\]: keys must be strings, not Name"),
    ("lone surrogate", {"s": ["ok", "a\ud800b"]}, r"payload\['s'\]\[1\]: .*lone surrogate"),
    ("surrogate key", {"a": {"k\udfff": 1}}, r"payload\['a'\]\['k\\udfff'\]: .*lone surrogate"),
    ("tuple", {"t": (1, 2)}, r"payload\['t'\]: a tuple would come back as a list"),
    ("set", {"s": {1, 2}}, r"payload is not JSON: payload\['s'\] is a set"),
    ("bytes", {"b": [b"x"]}, r"payload is not JSON: payload\['b'\]\[0\] is a bytes"),
    ("IntEnum", {"c": Colour.RED}, r"payload\['c'\]: .*Colour would come back as an int"),
    ("str subclass", {"n": Name("x")}, r"payload\['n'\]: .*Name would come back as a str"),
    ("OrderedDict", {"o": OrderedDict(a=1)}, r"payload\['o'\]: .*OrderedDict would come back"),
    ("nan", {"v": [0.5, math.nan]}, r"payload\['v'\]\[1\]: nan is not JSON"),
    ("inf", {"v": {"w": -math.inf}}, r"payload\['v'\]\['w'\]: -inf is not JSON"),
    ("huge int", {"n": 10**MAX_INT_DIGITS}, rf"payload\['n'\]: .*more than {MAX_INT_DIGITS:,}"),
    ("NUL value", {"a": ["\x00"]}, r"payload\['a'\]\[0\]: .*NUL"),
    ("NUL key", {"a": {"\x00": 1}}, r"payload\['a'\]\['\\x00'\]: .*NUL"),
    ("too deep", _too_deep(), rf"payload\['d'\]\[0\].*: nested deeper than {MAX_DEPTH} levels"),
    ("circular", _circular(), rf"payload\['loop'\]\[0\].*: nested deeper than {MAX_DEPTH}"),
]


@pytest.mark.parametrize(
    ("payload", "message"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_a_payload_that_would_change_is_refused_and_nothing_is_written(
    mf: MailFathom, payload: Any, message: str
) -> None:
    with pytest.raises(PayloadError, match=message) as refused:
        mf.enqueue("k", payload)
    assert "\n" not in str(refused.value)
    with pytest.raises(PayloadError, match=message):
        mf.enqueue_many("k", [{"fine": 1}, payload, {"fine": 2}])
    with pytest.raises(PayloadError, match=message):
        mf.schedule("s", cron="* * * * *", kind="k", payload=payload)
    assert mf.schedules.sync() == []
    assert total(mf) == 0


@pytest.mark.parametrize(
    ("payload", "advice"),
    [
        ({"a": {1: "x"}}, "use string keys"),
        ({"t": (1,)}, "pass a list"),
        ({"c": Colour.RED}, "pass int(value)"),
        ({"s": "\ud800"}, "fix the text"),
        ({"n": 10**MAX_INT_DIGITS}, "pass it as a string"),
        (_too_deep(), "flatten"),
    ],
)
def test_each_refusal_says_what_to_do(mf: MailFathom, payload: Any, advice: str) -> None:
    with pytest.raises(PayloadError, match=re.escape(advice)):
        mf.enqueue("k", payload)
    assert total(mf) == 0


def test_the_migration_keeps_existing_payloads_and_makes_new_ones_exact(
    database_url: str, clock: FakeClock
) -> None:
    with MailFathom(database_url, clock=clock) as app:
        dialect = app.store.dialect
        # every migration but 0006 (later ones add columns the code writes), then 0006 alone
        app.store.db.apply_migrations([m for m in load_migrations(dialect) if m[0] != 6])
        old = app.enqueue("k", {"b": 1, "a": ["x", None]})
        app.schedule("s", cron="* * * * *", kind="k", payload={"n": 2})
        assert app.schedules.sync() == ["s"]
        assert "0006_exact_payloads.sql" in app.migrate()
        assert app.jobs.get(old.id).payload == {"b": 1, "a": ["x", None]}
        assert app.schedules.get("s").payload == {"n": 2}
        new = app.enqueue("k", TRICKY)
        assert same(app.jobs.get(new.id).payload, TRICKY)
