"""docs/observability.md: its Python blocks run as written (in a process of their own,
since they configure a global tracer provider), its YAML blocks parse, and every metric
the Grafana dashboard and the alerts query is one mailfathom exports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

import mailfathom
from mailfathom import FakeClock, MailFathom
from mailfathom.observability import database_gauges, metrics
from mailfathom.observability.smtp_gauge import SmtpConfigurationGauge

DOCS = Path(__file__).parent.parent / "docs"
DOC = DOCS / "observability.md"
DASHBOARD = DOCS / "grafana-dashboard.json"
SOURCE = str(Path(mailfathom.__file__).resolve().parents[1])  # this tree's src, for the child
_SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def exported(tmp_path: Path) -> set[str]:
    """Every metric family name mailfathom's registries expose."""
    made = metrics.Metrics()
    with MailFathom(f"sqlite:///{tmp_path / 'names.db'}", clock=FakeClock()) as mf:
        mf.migrate()
        made.registry.register(database_gauges(mf, min_interval=0))
        made.registry.register(SmtpConfigurationGauge(mf.deliverer.gate))
        return {family.name for family in made.registry.collect()}


def queried(expression: str) -> set[str]:
    names = set(re.findall(r"\bmailfathom_[a-z_]+", expression))
    found = set()
    for name in names:
        base = name
        for suffix in _SUFFIXES:
            if name.endswith(suffix):
                base = name[: -len(suffix)]
                break
        found.add(base)
    return found


def test_the_python_blocks_run(tmp_path: Path) -> None:
    code = "\n".join(blocks("python"))
    assert "install_metrics()" in code and "set_tracer_provider" in code
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([SOURCE, os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_yaml_and_json_blocks_parse() -> None:
    for block in blocks("yaml"):
        assert yaml.safe_load(block)
    for block in blocks("json"):
        assert json.loads(block)["logger"] == "mailfathom.jobs.worker.runner"


def test_the_dashboard_and_alerts_query_only_exported_metrics(tmp_path: Path) -> None:
    names = exported(tmp_path)
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    (rules,) = [yaml.safe_load(b) for b in blocks("yaml") if "groups:" in b]
    alerts = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert {rule["alert"] for group in rules["groups"] for rule in group["rules"]} >= {
        "MailfathomDeadLettersGrowing",
        "MailfathomUnknownOutcomesWaiting",
        "MailfathomOldestDueJobTooOld",
        "MailfathomNoLiveWorkers",
    }
    for expression in expressions + alerts:
        missing = queried(expression) - names
        assert not missing, f"{expression} queries {missing}, which mailfathom does not export"
    # and every exported metric is on the dashboard
    on_dashboard = set().union(*(queried(e) for e in expressions))
    assert names - on_dashboard == {"mailfathom_metrics_database_up"}
