"""No password reaches the operator's screen or the logs, however the URL is malformed.

Each path a connection string can take out of mailfathom, really taken: the CLI as a
subprocess (a libpq keyword string and a URL missing a slash in "is not a URL", an
app's own URL in ``worker --app … --database``, a password with an unencoded ``@``
in ``health``), a real psycopg failure wrapped at the store boundary, and the pool's
own warnings and mailfathom's log records (caplog, and the JSON format).
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import psycopg
import pytest

from mailfathom import ConfigurationError, MailFathom, Settings, StoreError
from mailfathom.cli import run
from mailfathom.observability.logs import JsonFormatter, log_fields
from mailfathom.redact import redact
from worker_processes import run_cli

SECRET = "s3cret-pw"
# trust authentication: the server accepts any password, so these URLs work as given
AT_SIGN = "postgresql://postgres:s3cret@pass@127.0.0.1:5432/postgres?connect_timeout=1"
NOT_URLS = [
    f"host=127.0.0.1 port=5432 user=postgres password={SECRET}",
    f"host=127.0.0.1 password='{SECRET} with spaces' user=postgres",
    f"postgresql:/postgres:{SECRET}@127.0.0.1:5432/postgres",
    f"postgresql//postgres:{SECRET}@127.0.0.1:5432/postgres",
    f"postgres:{SECRET}@127.0.0.1:5432/postgres",
]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"postgresql://u:{SECRET}@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:s3cret@pass@h:5432/db", "postgresql://u:***@h:5432/db"),
        (f"'postgresql:/u:{SECRET}@h/db'", "'postgresql:/u:***@h/db'"),
        (f"postgresql//u:{SECRET}@h", "postgresql//u:***@h"),
        (f"(u:{SECRET}@h/db)", "(u:***@h/db)"),
        (f"postgresql://u@h/db?sslmode=require&password={SECRET}", "postgresql://u@h/db?sslmode=require&password=***"),
        (f"host=h sslpassword={SECRET} user=u", "host=h sslpassword=*** user=u"),
        (f"host=h password='{SECRET} x\\' y' user=u", "host=h password=*** user=u"),
        ("failed to resolve host 'pass@127.0.0.1'", "failed to resolve host '***@127.0.0.1'"),
        ('could not translate host name "p@ss@db"', 'could not translate host name "***@db"'),
        # nothing secret: unchanged
        ("MAIL FROM:<bob@example.com> refused for bob@example.com", None),
        ("write postgresql://user:password@host:port/dbname", None),
        ("sqlite:////var/lib/app/mailfathom.db and postgresql://app@db/app", None),
    ],
)  # fmt: skip
def test_redact_masks_passwords_and_nothing_else(text: str, shown: str | None) -> None:
    assert redact(text) == (text if shown is None else shown)


@pytest.mark.parametrize("url", NOT_URLS)
def test_a_url_that_is_no_url_is_refused_without_its_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        MailFathom(url)
    assert SECRET not in str(refused.value)
    assert run(["--database", url, "migrate"]) == 2
    shown = capsys.readouterr()
    assert "is not a URL" in shown.err or "is not supported" in shown.err
    assert SECRET not in shown.err + shown.out


def test_the_command_line_says_is_not_a_url_without_the_password() -> None:
    result = run_cli("--database", NOT_URLS[0], "migrate")
    assert result.returncode == 2, result.stderr
    assert "database_url 'host=127.0.0.1 port=5432 user=postgres password=***' is not a URL" in (
        result.stderr
    )
    assert SECRET not in result.stderr + result.stdout


def test_worker_names_the_apps_own_url_without_its_password(tmp_path: Path) -> None:
    result = run_cli(
        "worker", "--app", "startup_app:elsewhere", "--database", f"sqlite:///{tmp_path / 'db'}"
    )
    assert result.returncode != 0
    assert "uses the database 'postgresql://postgres:***@127.0.0.1:5432/postgres'" in (
        result.stderr
    )
    assert "app-s3cret" not in result.stderr + result.stdout


def _pool_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]


def test_a_password_with_an_unencoded_at_sign_stays_out_of_health(
    postgres_schema_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli("--database", AT_SIGN, "health")
    assert result.returncode == 1, result.stderr
    assert "failed to resolve host '***@127.0.0.1'" in result.stdout  # the driver's words
    assert "pass@" not in result.stdout + result.stderr
    assert "s3cret" not in result.stdout + result.stderr
    assert run(["--database", AT_SIGN, "health", "--json"]) == 1
    shown = capsys.readouterr()
    detail = json.loads(shown.out)["checks"]["database"]["detail"]
    assert "failed to resolve host '***@127.0.0.1'" in detail
    assert "pass@" not in shown.out + shown.err and "s3cret" not in shown.out + shown.err


def test_store_errors_and_pool_warnings_leave_the_password_out(
    postgres_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(psycopg.OperationalError) as raw:  # what the driver says
        psycopg.connect(AT_SIGN)
    assert "pass@127.0.0.1" in str(raw.value)
    with (
        caplog.at_level(logging.WARNING),
        MailFathom(AT_SIGN) as app,
        pytest.raises(StoreError) as failed,
    ):
        app.migrate()
    assert "'***@127.0.0.1'" in str(failed.value)
    assert "pass@" not in str(failed.value) and "s3cret" not in str(failed.value)
    warnings = _pool_warnings(caplog)
    assert any("***@127.0.0.1" in w for w in warnings), caplog.text
    assert "pass@" not in caplog.text and "s3cret" not in caplog.text


def test_log_records_and_their_json_fields_and_tracebacks_are_masked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    MailFathom(f"sqlite:///{tmp_path / 'db'}").close()  # an app guards the process's logs
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:1/postgres?connect_timeout=1"
    logger = logging.getLogger("mailfathom.test")
    with caplog.at_level(logging.INFO, logger="mailfathom"):
        try:
            raise RuntimeError(f"the driver quoted host=127.0.0.1 password={SECRET}")
        except RuntimeError:
            logger.warning(
                "could not open %s",
                url,
                exc_info=True,
                extra=log_fields("test_failed", url=url, error=f"host=x password={SECRET}"),
            )
    (record,) = [r for r in caplog.records if r.name == "mailfathom.test"]
    assert record.getMessage() == (
        "could not open postgresql://postgres:***@127.0.0.1:1/postgres?connect_timeout=1"
    )
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.emit(record)
    line = json.loads(out.getvalue())
    assert line["url"] == "postgresql://postgres:***@127.0.0.1:1/postgres?connect_timeout=1"
    assert line["error"] == "host=x password=***"
    assert "Traceback" in line["exc_info"]
    assert SECRET not in out.getvalue() and SECRET not in caplog.text


def test_records_of_other_loggers_and_bare_records_are_left_alone(tmp_path: Path) -> None:
    MailFathom(f"sqlite:///{tmp_path / 'db'}").close()  # the factory is installed
    url = f"postgresql://u:{SECRET}@h/db"
    bare = logging.makeLogRecord({"msg": url})  # no name at all
    assert bare.getMessage() == url
    theirs = logging.getLogger("myapp").makeRecord("myapp", logging.INFO, "f", 1, url, (), None)
    assert theirs.getMessage() == url  # the application's own records are its business


def test_the_settings_repr_masks_every_secret() -> None:
    token = "a-console-token-" + "z" * 32
    settings = Settings(
        database_url=f"postgresql://app:{SECRET}@db/app",
        smtp_url="smtp://mailer:smtp-s3cret@mail.example.com:587",
        web_token=token,
    )
    shown = repr(settings)
    assert "database_url='postgresql://app:***@db/app'" in shown
    assert "smtp_url='smtp://mailer:***@mail.example.com:587'" in shown
    assert "web_token='***'" in shown
    assert SECRET not in shown and "smtp-s3cret" not in shown and token not in shown
