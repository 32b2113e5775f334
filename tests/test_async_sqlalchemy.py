"""The async API's ``connection=`` takes a SQLAlchemy ``AsyncSession`` or
``AsyncConnection`` (aiosqlite, psycopg's async mode) and joins its transaction: a
FastAPI app on ``AsyncSession`` writes its row, its job and its email together or not at
all, on both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from email.message import EmailMessage

import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mailfathom import AsyncMailFathom, InvalidInput, MailFathom
from raw_database import raw_reading


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)


def async_url(database_url: str) -> str:
    """The same database, as SQLAlchemy's async drivers name it."""
    if database_url.startswith("postgresql://"):
        return "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
    return "sqlite+aiosqlite://" + database_url.removeprefix("sqlite://")


def make_engine(database_url: str) -> AsyncEngine:
    return create_async_engine(async_url(database_url))


@pytest.fixture
def tables(mf: MailFathom) -> Iterator[None]:
    """The application's orders table, beside mailfathom's."""
    with raw_reading(mf) as cur:
        cur.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    yield


def counts(mf: MailFathom) -> tuple[int, int, int]:
    """Committed orders, order jobs and outgoing emails, seen from another connection."""
    with raw_reading(mf) as cur:
        found = []
        for query in (
            "SELECT count(*) AS n FROM orders",
            "SELECT count(*) AS n FROM mf_jobs WHERE kind = 'orders.ship'",
            "SELECT count(*) AS n FROM mf_outbox",
        ):
            cur.execute(query)
            found.append(int(cur.fetchone()["n"]))
    return found[0], found[1], found[2]


def confirmation(order_id: int) -> EmailMessage:
    email = EmailMessage()
    email["From"] = "shop@example.com"
    email["To"] = "customer@example.org"
    email["Subject"] = f"Order {order_id}"
    email.set_content("Thank you.")
    return email


def shop(mf: MailFathom) -> FastAPI:
    """A FastAPI app on AsyncSession: an order, its shipping job and its confirmation
    email in one transaction."""
    amf = AsyncMailFathom(mf)
    engine = make_engine(mf.settings.database_url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await engine.dispose()

    async def session() -> AsyncIterator[AsyncSession]:
        async with sessions() as s:
            yield s

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders/{order_id}")
    async def place(
        order_id: int,
        refuse: bool = False,
        db: AsyncSession = Depends(session),  # noqa: B008 - FastAPI's way (a local dependency)
    ) -> dict[str, int]:
        db.add(Order(id=order_id))
        job = await amf.enqueue("orders.ship", {"order": order_id}, connection=db)
        email = await amf.outbox.record(confirmation(order_id), connection=db)
        if refuse:  # the session closes without a commit: everything is rolled back
            raise HTTPException(409, "refused")
        await db.commit()
        return {"job": job.id, "email": email.id}

    return app


def test_a_fastapi_app_on_async_session_writes_row_job_and_email_together(
    mf: MailFathom, tables: None
) -> None:
    with TestClient(shop(mf)) as client:
        assert client.post("/orders/1").status_code == 200
        assert counts(mf) == (1, 1, 1)
        assert client.post("/orders/2?refuse=true").status_code == 409
        assert counts(mf) == (1, 1, 1)  # neither the order, nor its job, nor its email
        assert client.post("/orders/3").status_code == 200
    assert counts(mf) == (2, 2, 2)


def test_an_async_connection_begun_or_not_joins_its_transaction(
    mf: MailFathom, tables: None
) -> None:
    import asyncio

    amf = AsyncMailFathom(mf)

    async def main() -> None:
        engine = make_engine(mf.settings.database_url)
        try:
            async with engine.connect() as conn:  # commit as you go
                await conn.execute(text("INSERT INTO orders (id) VALUES (1)"))
                await amf.enqueue_many("orders.ship", [{"order": 1}], connection=conn)
                await conn.rollback()
                await amf.enqueue("orders.ship", {"order": 2}, connection=conn)  # begins one
                assert counts(mf) == (0, 0, 0)
                await conn.commit()
            async with engine.begin() as conn:  # committed when the block ends
                await amf.outbox.record_many([confirmation(3)], connection=conn)
            closed = engine.connect()
            await closed.start()
            await closed.close()
            with pytest.raises(InvalidInput, match="closed SQLAlchemy AsyncConnection"):
                await amf.enqueue("orders.ship", {}, connection=closed)
        finally:
            await engine.dispose()

    asyncio.run(main())
    assert counts(mf) == (0, 1, 1)


def test_the_sync_api_refuses_an_async_session_and_points_at_the_async_one(
    mf: MailFathom, tables: None
) -> None:
    import asyncio

    async def main() -> None:
        engine = make_engine(mf.settings.database_url)
        try:
            async with AsyncSession(engine) as session:
                with pytest.raises(InvalidInput, match=r"await AsyncMailFathom\(mf\)\.enqueue"):
                    mf.enqueue("orders.ship", {}, connection=session)
        finally:
            await engine.dispose()

    asyncio.run(main())
    assert counts(mf) == (0, 0, 0)
