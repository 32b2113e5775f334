"""``connection=`` takes a SQLAlchemy ``Session`` or ``Connection`` and joins its transaction."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    scoped_session,
    sessionmaker,
)

from mailfathom import InvalidInput, MailFathom
from raw_database import raw_reading


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)


def sqlalchemy_url(database_url: str) -> str:
    """The same database, as SQLAlchemy names it (psycopg 3 for PostgreSQL)."""
    if database_url.startswith("postgresql://"):
        return "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
    return database_url


@pytest.fixture
def engine(mf: MailFathom, database_url: str) -> Iterator[Engine]:
    """An engine of the application's own on mailfathom's database, with an orders table."""
    engine = create_engine(sqlalchemy_url(database_url))
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def _orders(mf: MailFathom) -> int:
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM orders")
        return int(cur.fetchone()["n"])


def _message() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "shop@example.com"
    message["To"] = "customer@example.org"
    message["Subject"] = "Your order"
    message.set_content("Thank you.")
    return message


def test_a_rolled_back_session_leaves_no_job_email_or_row(mf: MailFathom, engine: Engine) -> None:
    with Session(engine) as session:
        session.add(Order(id=1))
        session.flush()
        assert mf.enqueue("orders.confirm", {"order": 1}, connection=session).created
        mf.enqueue_many("orders.audit", [{"n": 1}, {"n": 2}], connection=session)
        mf.outbox.record(_message(), connection=session)
        assert sum(mf.jobs.counts().values()) == 0, "visible before the session committed"
        session.rollback()
    assert sum(mf.jobs.counts().values()) == 0
    assert mf.outbox.list() == []
    assert _orders(mf) == 0


def test_a_committed_session_commits_its_rows_jobs_and_email(
    mf: MailFathom, engine: Engine
) -> None:
    with Session(engine) as session:
        job = mf.enqueue("orders.confirm", {"order": 1}, connection=session)  # first statement
        session.add(Order(id=1))
        email = mf.outbox.record(_message(), connection=session)
        session.commit()
    assert mf.jobs.get(job.id).payload == {"order": 1}
    assert mf.outbox.get(email.id).subject == "Your order"
    assert _orders(mf) == 1


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_connection_joins_its_transaction(mf: MailFathom, engine: Engine, outcome: str) -> None:
    with engine.connect() as conn:  # commit-as-you-go: the enqueue begins the transaction
        job = mf.enqueue("orders.confirm", {"order": 1}, connection=conn)
        conn.execute(text("INSERT INTO orders (id) VALUES (1)"))
        assert conn.in_transaction()
        getattr(conn, outcome)()
    expected = 1 if outcome == "commit" else 0
    assert sum(mf.jobs.counts().values()) == expected
    assert _orders(mf) == expected
    if expected:
        assert mf.jobs.get(job.id).kind == "orders.confirm"


def test_an_engine_begin_block_that_raises_leaves_nothing(mf: MailFathom, engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(text("INSERT INTO orders (id) VALUES (1)"))
        mf.enqueue("orders.confirm", {"order": 1}, connection=conn)
        raise RuntimeError("the request failed")
    assert sum(mf.jobs.counts().values()) == 0
    assert _orders(mf) == 0


def test_a_closed_connection_is_refused_and_writes_nothing(mf: MailFathom, engine: Engine) -> None:
    conn = engine.connect()
    conn.close()
    with pytest.raises(InvalidInput, match="closed SQLAlchemy Connection"):
        mf.enqueue("orders.confirm", connection=conn)
    assert sum(mf.jobs.counts().values()) == 0


def test_a_scoped_session_joins_its_transaction(mf: MailFathom, engine: Engine) -> None:
    session = scoped_session(sessionmaker(engine))
    session.add(Order(id=1))
    job = mf.enqueue("orders.confirm", {"order": 1}, connection=session)
    session.commit()
    mf.enqueue("orders.confirm", {"order": 2}, connection=session)
    session.rollback()
    session.remove()
    assert [j.id for j in mf.jobs.list()] == [job.id]
    assert _orders(mf) == 1
