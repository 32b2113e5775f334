"""PostgreSQL over a network that fails silently, and a server with no slot left.

A blackhole (``blackhole_proxy.py``: a loopback proxy that stops forwarding without
closing either side) stands for a dead middlebox or a firewall that drops a path's
packets: the kernel never reports anything, so only the client notices.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from blackhole_proxy import BlackholeProxy
from conftest import POSTGRES_URL, require_postgres
from mailfathom import JobState, MailFathom, StoreError
from mailfathom.store import open_store
from mailfathom.store.pg_network import TCP_DEFAULTS
from worker_processes import start_worker, stop, wait_for


def _parameters(url: str) -> tuple[dict[str, str], dict[str, str]]:
    """The libpq options of a pooled connection and of the LISTEN connection."""
    store = open_store(url)
    try:
        with store.db.reading() as cur:
            pooled = cur._cursor.connection.info.get_parameters()  # type: ignore[attr-defined]
        store.db.wait_for_jobs(0)
        listening = store.db._listener.info.get_parameters()  # type: ignore[attr-defined]
    finally:
        store.close()
    return pooled, listening


def test_every_connection_gets_keepalives_and_a_user_timeout(postgres_schema_url: str) -> None:
    for parameters in _parameters(postgres_schema_url):
        for name, value in TCP_DEFAULTS.items():
            assert parameters[name] == str(value), (name, parameters)
    assert TCP_DEFAULTS["tcp_user_timeout"] <= 10_000  # a silent loss surfaces within ~10 s
    assert TCP_DEFAULTS["keepalives_idle"] <= 10


def test_the_url_overrides_the_tcp_defaults(postgres_schema_url: str) -> None:
    url = f"{postgres_schema_url}&keepalives_idle=42&tcp_user_timeout=0"
    for parameters in _parameters(url):
        assert parameters["keepalives_idle"] == "42"
        assert parameters["tcp_user_timeout"] == "0"
        assert parameters["keepalives_interval"] == str(TCP_DEFAULTS["keepalives_interval"])


@pytest.fixture
def limited_role() -> Iterator[str]:
    """A login role the server admits no connection for (CONNECTION LIMIT 0)."""
    require_postgres()
    name = f"mf_full_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT 0")
    try:
        yield name
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {name}")


def test_a_server_with_no_slot_left_says_so(limited_role: str) -> None:
    parts = urlsplit(POSTGRES_URL)
    url = parts._replace(netloc=f"{limited_role}@{parts.hostname}:{parts.port or 5432}").geturl()
    with MailFathom(f"{url}?connect_timeout=1") as mf, pytest.raises(StoreError) as caught:
        mf.jobs.counts()
    message = str(caught.value)
    assert "no connection slot left" in message, message
    assert "check that the server runs" not in message
    assert "pooler" in message and "fewer worker" in message


@pytest.fixture
def blackhole() -> Iterator[BlackholeProxy]:
    require_postgres()
    parts = urlsplit(POSTGRES_URL)
    proxy = BlackholeProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield proxy
    proxy.close()


def _through(proxy: BlackholeProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")
    host = f"{netloc[0]}{netloc[1]}127.0.0.1:{proxy.port}"
    return parts._replace(netloc=host).geturl()


def _state(url: str, job_id: int) -> JobState:
    with MailFathom(url) as app:
        return app.jobs.get(job_id).state


@pytest.mark.slow
def test_a_worker_notices_a_silent_network_loss_and_recovers(
    blackhole: BlackholeProxy, postgres_schema_url: str, tmp_path: Path
) -> None:
    direct, log = postgres_schema_url, tmp_path / "worker.log"
    with MailFathom(direct) as app:
        app.migrate()
        first = app.enqueue("test.sleep", {"marker": str(tmp_path / "first"), "seconds": 0})
    worker = start_worker(_through(blackhole, direct), log, "--concurrency", "2")
    try:
        wait_for(lambda: _state(direct, first.id) is JobState.SUCCEEDED, 60, "a first job", log)
        blackhole.stop_forwarding()
        lost = time.monotonic()
        with MailFathom(direct) as app:  # the worker only hears of it through the blackhole
            second = app.enqueue("test.sleep", {"marker": str(tmp_path / "second"), "seconds": 0})
        wait_for(
            lambda: "PostgreSQL has not answered" in log.read_text(), 40, "the stall logged", log
        )
        noticed = time.monotonic() - lost
        wait_for(lambda: "PostgreSQL is unreachable" in log.read_text(), 40, "calls given up", log)
        assert worker.poll() is None
        assert _state(direct, second.id) is JobState.PENDING
        blackhole.resume()
        wait_for(
            lambda: _state(direct, second.id) is JobState.SUCCEEDED, 60, "work after", log, worker
        )
        # the deadline is 10 s after the worker's next call; on a loaded machine, later
        assert noticed < 30, f"the loss was logged only after {noticed:.0f} s"
    finally:
        blackhole.resume()
        assert stop(worker) == 0


def test_a_long_statement_on_a_reachable_server_is_left_to_finish(
    postgres_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(postgres_schema_url)
    store.db.stall_watch.stall_after = 0.2  # type: ignore[attr-defined]
    try:
        with (
            caplog.at_level("WARNING", logger="mailfathom.store.pg_network"),
            store.db.reading() as cur,
        ):
            cur.execute("SELECT pg_sleep(2.5) AS slept")
            assert cur.fetchone() is not None  # it finished: nobody cut it off
        messages = [record.getMessage() for record in caplog.records]
        assert any("has not answered a call" in m for m in messages), messages
        assert any("left to finish" in m for m in messages), messages
        assert not any("unreachable" in m for m in messages), messages
    finally:
        store.close()
