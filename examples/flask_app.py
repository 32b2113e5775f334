"""A Flask sign-up: the account, its welcome email and its follow-up job in one transaction.

Run it::

    export FLASK_APP=examples.flask_app:create MAILFATHOM_DATABASE_URL=sqlite:///accounts.db
    flask mailfathom migrate
    flask run                      # and, in another terminal:
    flask mailfathom worker

``POST /signup`` writes the account with SQLAlchemy, records the welcome email
and enqueues ``accounts.follow_up`` in the same session: all commit together, or
none does. The job runs inside the app's context (``current_app`` works there).
"""

import os
from email.message import EmailMessage

from flask import Flask, current_app, g, request
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from mailfathom import JobContext
from mailfathom.contrib.flask import MailFathomFlask


class Base(DeclarativeBase):
    """The app's own tables."""


class Account(Base):
    """One account."""

    __tablename__ = "accounts"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    followed_up_by: Mapped[str | None]


def sqlalchemy_url(database_url: str) -> str:
    """mailfathom's database URL as SQLAlchemy spells it (psycopg 3 for PostgreSQL)."""
    if database_url.startswith("postgresql://"):
        return "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
    return database_url


def create(database_url: str | None = None, smtp_url: str | None = None) -> Flask:
    """The app on ``database_url`` (default: ``MAILFATHOM_DATABASE_URL``)."""
    app = Flask(__name__)
    url = database_url or os.environ.get("MAILFATHOM_DATABASE_URL", "sqlite:///accounts.db")
    app.config.update(
        MAILFATHOM_DATABASE_URL=url, MAILFATHOM_SMTP_URL=smtp_url, SITE_NAME="Example Site"
    )
    mailfathom = MailFathomFlask(app)
    mailfathom.mf.migrate()
    engine = create_engine(sqlalchemy_url(url))
    Base.metadata.create_all(engine)
    app.extensions["engine"] = engine

    @mailfathom.job("accounts.follow_up")
    def follow_up(ctx: JobContext, account_id: int) -> None:
        # Inside the app's context: its config and extensions are there.
        db_engine: Engine = current_app.extensions["engine"]
        with Session(db_engine) as db:
            account = db.get(Account, account_id)
            if account is not None:
                account.followed_up_by = current_app.config["SITE_NAME"]
                db.commit()

    def db() -> Session:
        if "db" not in g:
            g.db = Session(engine)
        session: Session = g.db
        return session

    @app.teardown_appcontext
    def close_db(error: BaseException | None) -> None:
        session = g.pop("db", None)
        if session is not None:
            session.close()  # whatever was not committed is rolled back

    @app.post("/signup")
    def signup() -> tuple[dict[str, int], int]:
        data = request.get_json()
        session = db()
        account = Account(id=data["id"], email=data["email"])
        session.add(account)
        message = EmailMessage()
        message["From"] = "hello@example.com"
        message["To"] = account.email
        message["Subject"] = f"Welcome to {current_app.config['SITE_NAME']}"
        message.set_content("Your account is ready.")
        email = mailfathom.mf.outbox.record(message, connection=session)
        job = mailfathom.mf.enqueue(
            "accounts.follow_up", {"account_id": account.id}, connection=session
        )
        if data.get("fail"):
            raise RuntimeError("sign-up failed after the writes")  # nothing is committed
        session.commit()
        return {"account": account.id, "email": email.id, "job": job.id}, 201

    return app
