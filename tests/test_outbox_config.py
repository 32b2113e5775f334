"""The SMTP URL and the delivery settings: parsed and checked at start, errors name the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailfathom import ConfigurationError, MailFathom, Settings
from mailfathom.delivery.smtp_url import parse_smtp_url


def test_smtp_urls() -> None:
    plain = parse_smtp_url("smtp://mail.example.com")
    assert (plain.scheme, plain.host, plain.port, plain.starttls) == (
        "smtp",
        "mail.example.com",
        25,
        "auto",
    )
    assert (plain.username, plain.password, plain.implicit_tls) == (None, None, False)
    full = parse_smtp_url("smtp://app%40example.com:p%40ss%3Aw0rd@mail.example.com:587")
    assert (full.username, full.password, full.port) == ("app@example.com", "p@ss:w0rd", 587)
    assert "p@ss" not in repr(full) and full.describe() == "smtp://mail.example.com:587"
    implicit = parse_smtp_url("smtps://mail.example.com?helo=app.example.com")
    assert (implicit.port, implicit.implicit_tls, implicit.local_hostname()) == (
        465,
        True,
        "app.example.com",
    )
    assert parse_smtp_url("smtp://h?starttls=off").starttls == "off"
    assert parse_smtp_url("SMTP://h?starttls=require").starttls == "require"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mail.example.com:25", "not a URL"),
        ("http://mail.example.com", "scheme 'http' is not supported"),
        ("smtp://:25", "names no host"),
        ("smtp://h:port", "bad port"),
        ("smtp://h?starttls=maybe", "starttls='maybe'"),
        ("smtp://h?tls=yes", "unknown options \\['tls'\\]"),
        ("smtps://h?starttls=require", "already TLS"),
        ("smtp://h?cafile=/no/such/ca.pem", "cafile"),
    ],
)
def test_bad_smtp_urls_are_refused_at_start(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MailFathom(f"sqlite:///{tmp_path / 'mf.db'}", smtp_url=url)


def test_delivery_settings(tmp_path: Path) -> None:
    env = {
        "MAILFATHOM_SMTP_URL": "smtps://mail.example.com",
        "MAILFATHOM_SMTP_DATA_TIMEOUT": "90",
        "MAILFATHOM_DELIVERY_MAX_ATTEMPTS": "5",
    }
    settings = Settings.load({}, environ=env, toml_path=tmp_path / "none.toml")
    assert (settings.smtp_url, settings.smtp_data_timeout, settings.delivery_max_attempts) == (
        "smtps://mail.example.com",
        90.0,
        5,
    )
    defaults = Settings.load({}, environ={}, toml_path=tmp_path / "none.toml")
    assert (defaults.smtp_timeout, defaults.smtp_data_timeout) == (300.0, 600.0)
    assert (defaults.delivery_max_attempts, defaults.delivery_queue) == (48, "mail")
    for bad, name in (
        ({"smtp_data_timeout": 0}, "smtp_data_timeout"),
        ({"delivery_max_attempts": 0}, "delivery_max_attempts"),
        ({"delivery_queue": "no spaces"}, "delivery_queue"),
    ):
        with pytest.raises(ConfigurationError, match=name):
            Settings.load(bad, environ={}, toml_path=tmp_path / "none.toml")


def test_the_delivery_kind_follows_the_settings(tmp_path: Path) -> None:
    with MailFathom(
        f"sqlite:///{tmp_path / 'mf.db'}", delivery_queue="outgoing", delivery_max_attempts=3
    ) as app:
        kind = app.registry.get("mailfathom.deliver")
        assert kind is not None
        assert (kind.queue, kind.max_attempts) == ("outgoing", 3)
