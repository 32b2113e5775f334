"""Settings: argument, then environment, then mailfathom.toml, then default; all validated."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from mailfathom import ConfigurationError, MailFathom, Settings


def test_defaults(tmp_path: Path) -> None:
    settings = Settings.load({}, environ={}, toml_path=tmp_path / "none.toml")
    assert settings.database_url == "sqlite:///mailfathom.db"
    assert (settings.concurrency, settings.lease, settings.shutdown_timeout) == (10, 30.0, 30.0)
    assert (settings.web_host, settings.web_port, settings.smtp_url) == ("127.0.0.1", 8025, None)
    assert settings.web_secure_cookies is False
    for raw, flag in [("1", True), ("On", True), ("false", False), ("no", False)]:
        env = {"MAILFATHOM_WEB_SECURE_COOKIES": raw}
        assert (
            Settings.load({}, environ=env, toml_path=tmp_path / "none.toml").web_secure_cookies
            is flag
        )


def test_precedence_argument_environment_file(tmp_path: Path) -> None:
    toml = tmp_path / "mailfathom.toml"
    toml.write_text('database_url = "sqlite:///file.db"\nconcurrency = 3\nlease = 12.5\n')
    env = {"MAILFATHOM_DATABASE_URL": "sqlite:///env.db", "MAILFATHOM_CONCURRENCY": "4"}
    from_file = Settings.load({}, environ={}, toml_path=toml)
    assert (from_file.database_url, from_file.concurrency, from_file.lease) == (
        "sqlite:///file.db",
        3,
        12.5,
    )
    from_env = Settings.load({}, environ=env, toml_path=toml)
    assert (from_env.database_url, from_env.concurrency) == ("sqlite:///env.db", 4)
    given = Settings.load({"database_url": "sqlite:///arg.db"}, environ=env, toml_path=toml)
    assert given.database_url == "sqlite:///arg.db"


@pytest.mark.parametrize(
    ("arguments", "environ", "message"),
    [
        ({"database_url": "nonsense"}, {}, "database_url"),
        ({"concurrency": 0}, {}, "concurrency"),
        ({}, {"MAILFATHOM_CONCURRENCY": "many"}, "MAILFATHOM_CONCURRENCY"),
        ({"lease": 0.5}, {}, "lease"),
        ({"web_port": 70000}, {}, "web_port"),
        ({}, {"MAILFATHOM_WEB_SECURE_COOKIES": "maybe"}, "MAILFATHOM_WEB_SECURE_COOKIES"),
        ({"web_secure_cookies": "yes"}, {}, "web_secure_cookies must be true or false"),
        ({"colour": "blue"}, {}, "unknown settings"),
    ],
)
def test_bad_settings_name_the_setting(
    tmp_path: Path, arguments: dict[str, object], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.load(arguments, environ=environ, toml_path=tmp_path / "none.toml")


def test_bad_toml_is_reported(tmp_path: Path) -> None:
    toml = tmp_path / "mailfathom.toml"
    toml.write_text("this is = = not toml")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        Settings.load({}, environ={}, toml_path=toml)
    toml.write_text("colour = 'blue'\n")
    with pytest.raises(ConfigurationError, match="unknown settings"):
        Settings.load({}, environ={}, toml_path=toml)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://localhost/db", "not supported"),
        ("sqlite://", "no file path"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:////no/such/folder/x.db", "does not exist"),
    ],
)
def test_bad_database_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MailFathom(url)


def test_password_is_redacted_in_errors() -> None:
    with pytest.raises(ConfigurationError) as raised:
        MailFathom("mysql://user:secret@localhost/db")
    assert "secret" not in str(raised.value)


SETTINGS_REFUSED = [
    ("lease", 0.01, "lease must be at least 1 second"),
    ("lease", float("nan"), "lease must be a positive number of seconds"),
    ("shutdown_timeout", 0, "shutdown_timeout must be a positive number of seconds"),
    ("max_payload_bytes", -5, "max_payload_bytes must be a positive integer"),
    ("concurrency", 0, "concurrency must be a positive integer"),
    ("concurrency", True, "concurrency must be a positive integer"),
    ("snooze_limit", 0, "snooze_limit must be a positive integer"),
    ("smtp_sessions", 0, "smtp_sessions must be a positive integer"),
    ("smtp_config_retry", 0, "smtp_config_retry must be a positive number of seconds"),
    ("web_port", 70_000, "web_port must be at most 65535"),
    ("delivery_queue", "mail\n", "delivery_queue 'mail\\\\n' is not usable"),
    ("delivery_max_attempts", 10_001, "delivery_max_attempts must be an integer from 1 to"),
    ("database_url", "nonsense", "database_url 'nonsense' is not a URL"),
    ("smtp_url", 42, "smtp_url must be"),
    ("web_host", "", "web_host must be"),
    ("web_token", 7, "web_token must be"),
    ("dkim_domain", "example.com", "DKIM signing needs"),
    ("clock_skew", -1, "clock_skew must be a number of seconds from 0 to"),
    ("clock_skew", 7200, "clock_skew must be a number of seconds from 0 to"),
    ("retention", {"Succeeded": "soon"}, r"retention\['Succeeded'\] = 'soon' is not a retention"),
    ("retention_kinds", {"k": {"Claimed": "1d"}}, r"retention_kinds\['k'\] names \['Claimed'\]"),
    ("email_retention", {"Sent": 0}, r"email_retention\['Sent'\] = 0 must be a positive"),
    ("audit_retention", "1 year", "audit_retention = '1 year' is not a retention period"),
    ("retention_delete_keyless", "yes", "retention_delete_keyless must be true or false"),
    ("strict_kinds", "yes", "strict_kinds must be true or false"),
    ("prune_interval", -1, "prune_interval must be a number of seconds"),
    ("prune_batch", 0, "prune_batch must be an integer from 1 to 100000"),
    ("sqlite_busy_timeout", -1, "sqlite_busy_timeout must be a number of seconds from 0"),
    ("enqueue_timeout", 0, "enqueue_timeout must be a positive number of seconds"),
    ("domain_limits", {"gmail.com": {"connections": 0}}, r"domain_limits\['gmail.com'\]"),
    ("sns_topic_arns", "arn:aws:sns:eu-west-1:1:x", "is not an SNS topic ARN"),
    ("sns_topic_arns", 7, "sns_topic_arns must be text or unset"),
]


@pytest.mark.parametrize(("name", "value", "message"), SETTINGS_REFUSED, ids=str)
def test_settings_are_validated_however_they_are_made(
    database_url: str, name: str, value: object, message: str
) -> None:
    """``Settings(...)`` and ``dataclasses.replace`` check as ``Settings.load`` does, so
    ``MailFathom(settings=...)`` cannot start with a value ``load`` would refuse."""
    changes: dict[str, Any] = {name: value}
    with pytest.raises(ConfigurationError, match=message):
        Settings(**{"database_url": database_url, **changes})
    good = Settings(database_url=database_url)
    with pytest.raises(ConfigurationError, match=message):
        replace(good, **changes)
    with MailFathom(settings=good) as mf:
        assert mf.settings is good


def test_the_settings_that_are_checked_are_the_settings_there_are() -> None:
    """Each setting is checked by at least one case above (a new one needs its own)."""
    assert {name for name, _, _ in SETTINGS_REFUSED} | {"web_secure_cookies"} >= {
        f.name
        for f in fields(Settings)
        if f.name not in {"smtp_timeout", "smtp_data_timeout", "max_message_bytes"}
        and not f.name.startswith("dkim_")
    }
