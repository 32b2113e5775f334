"""Every log call in ``src/`` carries its fields in ``extra``, through one logger per
module named ``__name__`` (an AST walk over the source; docs/observability.md)."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "src" / "mailfathom"

#: The logging methods that write a record.
LOG_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical", "log"})

#: Loggers named for a channel rather than a module, each a documented interface.
NAMED_CHANNELS = {
    # docs/console.md: refused requests are logged on this channel, for alerting on.
    ("web/throttle.py", "mailfathom.web.security"),
    # docs/worker.md: the logger handlers get as ctx.logger.
    ("jobs/worker/execute.py", "mailfathom.handlers"),
}


def _is_get_logger(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getLogger"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "logging"
    )


def problems(relative: str, text: str) -> list[str]:
    """What is wrong with the log calls of one module's source (empty when nothing)."""
    tree = ast.parse(text)
    found: list[str] = []
    loggers: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and _is_get_logger(statement.value):
            call = statement.value
            assert isinstance(call, ast.Call)
            arg = call.args[0] if call.args else None
            named = isinstance(arg, ast.Name) and arg.id == "__name__"
            channel = isinstance(arg, ast.Constant) and (relative, arg.value) in NAMED_CHANNELS
            if not (named or channel):
                found.append(
                    f"{relative}:{statement.lineno}: a module's logger is "
                    "logging.getLogger(__name__)"
                )
            loggers.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    if len(loggers) > 1:
        found.append(f"{relative}: one logger per module, not {sorted(loggers)}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if node.func.attr not in LOG_METHODS or not isinstance(owner, ast.Name):
            continue
        if owner.id == "logging":
            found.append(f"{relative}:{node.lineno}: logging.{node.func.attr}() logs on the root")
            continue
        if owner.id not in loggers:
            continue
        where = f"{relative}:{node.lineno}: {owner.id}.{node.func.attr}()"
        if not any(keyword.arg == "extra" for keyword in node.keywords):
            found.append(f"{where} has no extra= (pass its fields by name: log_fields)")
        message = node.args[1 if node.func.attr == "log" else 0] if node.args else None
        if isinstance(message, ast.JoinedStr | ast.BinOp):
            found.append(f"{where} builds its message (use %-arguments and extra=)")
    return found


def test_every_log_call_in_the_source_carries_extra_on_its_module_logger() -> None:
    found: list[str] = []
    modules = sorted(SOURCE.rglob("*.py"))
    for path in modules:
        found += problems(path.relative_to(SOURCE).as_posix(), path.read_text())
    assert found == []
    assert len(modules) > 50  # the walk did see the source


def test_the_check_finds_what_it_is_for() -> None:
    bad = """
import logging
logger = logging.getLogger("mailfathom.worker")
other = logging.getLogger(__name__)

def f(job_id):
    logger.info("job_id=%d done", job_id)
    logger.warning(f"job_id={job_id} failed", extra={"mailfathom": {"job_id": job_id}})
    other.log(logging.INFO, "x " + str(job_id), extra={})
    logging.error("root")
    logger.isEnabledFor(logging.INFO)
"""
    found = problems("jobs/bad.py", bad)
    assert found == [
        "jobs/bad.py:3: a module's logger is logging.getLogger(__name__)",
        "jobs/bad.py: one logger per module, not ['logger', 'other']",
        "jobs/bad.py:7: logger.info() has no extra= (pass its fields by name: log_fields)",
        "jobs/bad.py:8: logger.warning() builds its message (use %-arguments and extra=)",
        "jobs/bad.py:9: other.log() builds its message (use %-arguments and extra=)",
        "jobs/bad.py:10: logging.error() logs on the root",
    ]
    good = """
import logging
from mailfathom.observability.logs import log_fields
logger = logging.getLogger(__name__)

def f(job_id):
    logger.info("job_id=%d done", job_id, extra=log_fields("done", job_id=job_id))
"""
    assert problems("jobs/good.py", good) == []
    channel = 'import logging\nsecurity_log = logging.getLogger("mailfathom.web.security")\n'
    assert problems("web/throttle.py", channel) == []
    assert problems("web/other.py", channel) != []
