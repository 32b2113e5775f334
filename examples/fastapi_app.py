"""A FastAPI shop: orders in SQLAlchemy, their jobs and email in the same transaction.

Run it (a worker inside the web process, the console under ``/ops``)::

    MAILFATHOM_DATABASE_URL=sqlite:///shop.db uvicorn --factory examples.fastapi_app:create

``POST /orders`` writes the order, enqueues its confirmation job and records its
email in one SQLAlchemy session: all three commit together, or none does. The
console at ``/ops/`` answers to the users :func:`console_user` knows (a stand-in
for your own authentication: here a header): ``ada`` operates, ``grace`` only looks.
"""

import os
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel
from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from mailfathom import JobContext, MailFathom
from mailfathom.contrib.starlette import worker_lifespan
from mailfathom.web import ConsoleUser, create_app


class Base(DeclarativeBase):
    """The shop's own tables."""


class Order(Base):
    """One order."""

    __tablename__ = "shop_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]


class NewOrder(BaseModel):
    """What ``POST /orders`` takes; ``fail`` makes the request fail after the writes."""

    id: int
    email: str
    fail: bool = False


#: Who may use the console: your login would decide this from the session or a token.
CONSOLE_USERS = {
    "ada": ConsoleUser("ada"),
    "grace": ConsoleUser("grace", read_only=True),
}


def console_user(request: Request) -> ConsoleUser | None:
    """The console's ``auth``: the user the request says it is, or None to refuse."""
    return CONSOLE_USERS.get(request.headers.get("x-demo-user", ""))


def sqlalchemy_url(database_url: str) -> str:
    """mailfathom's database URL as SQLAlchemy spells it (psycopg 3 for PostgreSQL)."""
    if database_url.startswith("postgresql://"):
        return "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
    return database_url


def create(database_url: str | None = None, *, run_worker: bool = True) -> FastAPI:
    """The shop on ``database_url`` (default: ``MAILFATHOM_DATABASE_URL``)."""
    url = database_url or os.environ.get("MAILFATHOM_DATABASE_URL", "sqlite:///shop.db")
    mf = MailFathom(url)
    mf.migrate()
    engine = create_engine(sqlalchemy_url(url))
    Base.metadata.create_all(engine)
    sessions = sessionmaker(engine)

    @mf.job("shop.confirm", max_attempts=5)
    def confirm(ctx: JobContext, order_id: int) -> None:
        ctx.logger.info("order %d confirmed", order_id)

    def session() -> Iterator[Session]:
        with sessions() as db:
            yield db

    app = FastAPI(lifespan=worker_lifespan(mf) if run_worker else None)
    app.state.mf = mf
    app.state.engine = engine

    @app.post("/orders", status_code=201)
    def place_order(order: NewOrder, db: Annotated[Session, Depends(session)]) -> dict[str, int]:
        db.add(Order(id=order.id, email=order.email))
        job = mf.enqueue("shop.confirm", {"order_id": order.id}, connection=db)
        message = EmailMessage()
        message["From"] = "shop@example.com"
        message["To"] = order.email
        message["Subject"] = f"Order {order.id}"
        message.set_content("Thank you for your order.")
        email = mf.outbox.record(message, idempotency_key=f"order:{order.id}", connection=db)
        if order.fail:
            db.rollback()  # as any error in the request would: the order, job and email go
            raise HTTPException(500, "the order failed; nothing was kept")
        db.commit()
        return {"order": order.id, "job": job.id, "email": email.id}

    app.mount("/ops", create_app(mf, auth=console_user))
    return app
