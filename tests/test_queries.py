"""The one SQL source: common statements, each dialect's overrides, the loading rules,
the capabilities and the translation of ``:name`` parameters to psycopg's style."""

from __future__ import annotations

import dataclasses
import re

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import POSTGRES_URL, require_postgres
from mailfathom.store.dialect import CAPABILITIES, STATEMENTS, Capabilities, check_capabilities
from mailfathom.store.queries import (
    DIALECTS,
    QueryError,
    assemble,
    build_queries,
    load_blocks,
    load_queries,
    parse_blocks,
    to_pyformat,
)

# The statements each dialect writes its own way (all of them marked `-- per-dialect` in
# common/). Listed here so that a new override shows up in review.
OVERRIDDEN = [
    "claim_jobs",
    "claim_jobs_in_queues",
    "claim_jobs_unlimited",
    "claims_waiting",
    "compact_attempts",
    "compact_email_events",
    "compact_emails",
    "compact_job_events",
    "compact_jobs",
    "complete_jobs",
    "count_prunable_email_events",
    "count_prunable_emails",
    "count_prunable_job_events",
    "count_prunable_jobs",
    "delete_emails",
    "delete_jobs",
    "email_recipients",
    "expire_emails",
    "extend_leases",
    "filter_text",
    "finish_pruner",
    "flow_candidates",
    "flow_claim_ids",
    "flow_clock",
    "flow_delete_limits",
    "flow_insert_starts",
    "flow_running",
    "flow_set_keys",
    "flow_starts_keys",
    "flow_waiting",
    "insert_job",
    "insert_job_id",
    "insert_recipients",
    "jobs_by_keys",
    "message_records",
    "metrics_oldest_due",
    "metrics_unhandled_kinds",
    "queue_names",
    "reap_expired_leases",
    "release_unstarted",
    "split_recipients",
    "start_attempts",
    "suppressed_among",
    "throughput_failures",
    "throughput_jobs",
    "unstart_attempts",
    "upsert_schedule",
    "upsert_worker",
]

# The statements only one dialect has (`-- dialect-only`), each one a capability's.
DIALECT_ONLY = {
    "sqlite": [
        "begin_attempt",
        "claim_jobs_in_one_queue",
        "claim_jobs_in_one_queue_unlimited",
        "end_attempt",
        "owed_recipients_of",
        "repack_copy",
        "repack_drop",
        "repack_jobs",
        "repack_restore",
    ],
    "postgresql": [
        "claim_jobs_in_queues_unlimited",
        "end_attempt_whole",
        "flow_lock",
        "insert_jobs",
        "insert_keyless_job",
        "insert_keyless_jobs",
        "notify_jobs",
        "plan_claims",
        "prune_lock",
        "record_email",
        "record_emails",
        "record_emails_keyed",
    ],
}


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_each_dialect_overrides_exactly_the_listed_statements(dialect: str) -> None:
    common, overrides = load_blocks(dialect)
    overridden = sorted(name for name, block in overrides.items() if block.marker is None)
    own = sorted(name for name, block in overrides.items() if block.marker == "-- dialect-only")
    assert overridden == OVERRIDDEN
    assert own == DIALECT_ONLY[dialect]
    per_dialect = sorted(n for n, b in common.items() if b.marker == "-- per-dialect")
    assert per_dialect == OVERRIDDEN


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_statement_is_loaded_with_the_dialects_capabilities(dialect: str) -> None:
    common, overrides = load_blocks(dialect)
    queries = load_queries(dialect)
    assert set(queries) == (set(common) | set(overrides))
    assert all(sql for sql in queries.values())
    check_capabilities(CAPABILITIES[dialect], set(queries))


def test_common_statements_use_named_parameters_only() -> None:
    common, _ = load_blocks("sqlite")
    for name, block in common.items():
        assert "%(" not in block.sql, name
        assert "?" not in block.sql, name


def test_postgresql_statements_are_in_psycopgs_style() -> None:
    for name, sql in load_queries("postgresql").items():
        without_casts = re.sub(r"'[^']*'|::", "", sql)
        assert not re.search(r":[A-Za-z_]", without_casts), name


# -- the loading rules ---------------------------------------------------------------------


def _blocks(text: str) -> dict[str, object]:
    return dict(parse_blocks(text))


COMMON = """
-- name: get_job
SELECT * FROM mf_jobs WHERE id = :id;

-- name: claim_jobs
-- per-dialect
"""


def test_a_dialect_statement_overrides_the_common_one_of_its_name() -> None:
    common = parse_blocks(COMMON)
    overrides = parse_blocks(
        "-- name: claim_jobs\nSELECT 1;\n-- name: get_job\nSELECT 2 WHERE :id = 1;\n"
        "-- name: notify_jobs\n-- dialect-only\nNOTIFY x;\n"
    )
    assert assemble(common, overrides, "x") == {
        "get_job": "SELECT 2 WHERE :id = 1",
        "claim_jobs": "SELECT 1",
        "notify_jobs": "NOTIFY x",
    }


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ("-- name: get_jobs\nSELECT 1;", "lacks query 'claim_jobs'"),
        (
            "-- name: claim_jobs\nSELECT 1;\n-- name: get_jobz\nSELECT 1;",
            "'get_jobz' overrides nothing in common",
        ),
        (
            "-- name: claim_jobs\nSELECT 1;\n-- name: get_job\n-- dialect-only\nSELECT 1;",
            "'get_job' is dialect-only but also in common",
        ),
        ("-- name: claim_jobs\n-- per-dialect\nSELECT 1;", "'claim_jobs' is marked per-dialect"),
        ("-- name: claim_jobs\n-- only a comment\n", "'claim_jobs' has no body"),
    ],
)
def test_a_broken_override_is_an_error_at_load(overrides: str, error: str) -> None:
    with pytest.raises(QueryError, match=re.escape(error)):
        assemble(parse_blocks(COMMON), parse_blocks(overrides), "x")


def test_a_per_dialect_statement_with_a_body_in_common_is_an_error() -> None:
    common = parse_blocks("-- name: claim_jobs\n-- per-dialect\nSELECT 1;")
    overrides = parse_blocks("-- name: claim_jobs\nSELECT 2;")
    with pytest.raises(QueryError, match="per-dialect but has a body"):
        assemble(common, overrides, "x")


def test_a_name_defined_twice_is_an_error() -> None:
    with pytest.raises(QueryError, match="'get_job' is defined twice"):
        parse_blocks("-- name: get_job\nSELECT 1;\n-- name: get_job\nSELECT 2;")


def _statements_for(capabilities: Capabilities) -> set[str]:
    names: set[str] = set()
    for field in dataclasses.fields(Capabilities):
        when_on, when_off = STATEMENTS[field.name]
        names |= when_on if getattr(capabilities, field.name) else when_off
    return names


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("flag", [f.name for f in dataclasses.fields(Capabilities)])
def test_a_capability_that_disagrees_with_the_statements_is_an_error_at_load(
    dialect: str, flag: str
) -> None:
    capabilities = CAPABILITIES[dialect]
    names = _statements_for(capabilities)
    check_capabilities(capabilities, names)
    flipped = dataclasses.replace(capabilities, **{flag: not getattr(capabilities, flag)})
    with pytest.raises(ValueError, match=flag):
        check_capabilities(flipped, names)
    common, overrides = load_blocks(dialect)
    with pytest.raises(QueryError, match=flag):
        build_queries(common, overrides, dialect, flipped, pyformat=DIALECTS[dialect])


def test_every_capability_has_its_statements_listed() -> None:
    flags = {field.name for field in dataclasses.fields(Capabilities)}
    assert set(STATEMENTS) == flags
    for when_on, when_off in STATEMENTS.values():
        assert when_on or when_off
        assert not when_on & when_off


# -- the translation to psycopg's style ------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT :id", "SELECT %(id)s"),
        ("WHERE id = :id::bigint", "WHERE id = %(id)s::bigint"),
        ("SELECT now()::text", "SELECT now()::text"),
        ("SELECT 'a:b', \"c:d\"", "SELECT 'a:b', \"c:d\""),
        ("SELECT 'it''s :x'", "SELECT 'it''s :x'"),
        ("SELECT E'\\n:x\\'' || :y", "SELECT E'\\n:x\\'' || %(y)s"),
        ("WHERE a LIKE '50%' AND b % 2 = 0", "WHERE a LIKE '50%%' AND b %% 2 = 0"),
        ("SELECT 1 -- :x is 100%\n, :y", "SELECT 1 -- :x is 100%%\n, %(y)s"),
        ("SELECT /* :x */ :y", "SELECT /* :x */ %(y)s"),
        ("unnest(%(keys)b::text[], :rows)", "unnest(%(keys)b::text[], %(rows)s)"),
        ("SELECT a[1:2]", "SELECT a[1:2]"),
    ],
)
def test_named_parameters_become_psycopgs(sql: str, expected: str) -> None:
    assert to_pyformat(sql) == expected


# Pieces of SQL, each with its psycopg translation: a statement made of any of them in any
# order translates piece by piece (whitespace keeps neighbours from merging).
_IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_TEXT = st.text(alphabet=st.sampled_from("ab:%' -\\x"), max_size=12)
_PIECES = st.one_of(
    _IDENT.map(lambda n: (f":{n}", f"%({n})s")),
    _IDENT.map(lambda n: (f":{n}::text", f"%({n})s::text")),
    _IDENT.map(lambda n: (n, n)),
    _TEXT.map(lambda t: t.replace("'", "''")).map(
        lambda t: (f"'{t}'", f"'{t.replace('%', '%%')}'")
    ),
    _TEXT.map(lambda t: t.replace("\n", "")).map(
        lambda t: (f"-- {t}\n", f"-- {t.replace('%', '%%')}\n")
    ),
    st.just(("%", "%%")),
    st.just(("::bigint", "::bigint")),
)


@given(st.lists(_PIECES, max_size=12))
def test_translation_handles_each_piece_of_a_statement(pieces: list[tuple[str, str]]) -> None:
    assert to_pyformat(" ".join(p for p, _ in pieces)) == " ".join(t for _, t in pieces)


@given(
    value=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20),
    literal=st.text(alphabet=st.sampled_from("ab:%_"), max_size=10),
)
def test_psycopg_runs_the_translated_statement_as_written(value: str, literal: str) -> None:
    require_postgres()
    sql = (
        f"SELECT :value::text AS value, '{literal}' AS literal, :value::text LIKE '%' AS any"
        " -- :value is bound, 100% of the time\n"
    )
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        row = conn.execute(to_pyformat(sql), {"value": value}).fetchone()
    assert row == (value, literal, True)
