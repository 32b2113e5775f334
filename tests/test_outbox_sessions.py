"""``smtp_sessions``: delivery threads send on SMTP sessions of their own, in parallel,
never more at once than the setting allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailfathom import ConfigurationError, FakeClock, MailFathom, OutgoingEmailStage, Settings
from smtp_fixtures import FaultServer
from test_outbox_smtp import message


@pytest.mark.parametrize("sessions", [1, 2])
def test_deliveries_run_on_at_most_smtp_sessions_connections_in_parallel(
    database_url: str, clock: FakeClock, smtp: FaultServer, sessions: int
) -> None:
    smtp.script(rcpt_stall=0.1)  # each transaction holds its session a while
    with MailFathom(database_url, clock=clock, smtp_url=smtp.url(), smtp_sessions=sessions) as app:
        app.migrate()
        app.outbox.record_many([message(to=f"u{n}@example.com") for n in range(6)])
        app.worker(concurrency=4).run(burst=True)
        assert app.outbox.counts()[OutgoingEmailStage.SENT] == 6
    connections = {r.connection for r in smtp.received()}
    assert len(connections) == sessions, connections


def test_the_setting_is_validated(tmp_path: Path) -> None:
    none = tmp_path / "none.toml"
    assert Settings.load({}, environ={}, toml_path=none).smtp_sessions == 16
    env = {"MAILFATHOM_SMTP_SESSIONS": "4"}
    assert Settings.load({}, environ=env, toml_path=none).smtp_sessions == 4
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ConfigurationError, match="smtp_sessions must be a positive integer"):
            Settings.load({"smtp_sessions": bad}, environ={}, toml_path=none)
