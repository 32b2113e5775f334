"""Log set-up for the commands: ``--log-format text`` (the default) or ``json``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

In JSON every record is one line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``,
``message`` (for humans), the fields the call passed in ``extra`` — those under the
``mailfathom`` key (the convention of mailfathom's own calls) at the top level — and
``exc_info`` with the traceback when there is one. A field whose value JSON cannot
hold is written as its ``repr``.

mailfathom's own calls build their ``extra`` with :func:`log_fields`: an ``action``
naming the event (``worker_started``, ``attempt``, ``email_stage``, …) and the values
the message interpolates, by name, so a JSON reader never parses the message text.
Each module logs through one logger, ``logging.getLogger(__name__)``
(tests/test_log_calls.py holds every call in ``src/`` to both).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from mailfathom.redact import guard_logs, redact

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure", "log_fields"]

#: The ``--log-format`` choices.
LOG_FORMATS = ("text", "json")
LogFormat = Literal["text", "json"]

_TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"
#: Attributes every LogRecord has: anything else on a record came from ``extra``.
_STANDARD = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
) | {"message", "asctime", "taskName"}


def log_fields(action: str, /, **values: Any) -> dict[str, Any]:
    """The ``extra`` of one of mailfathom's log calls: ``{"mailfathom": {"action": …,
    **values}}`` (the JSON formatter writes these at the top level of the line; a text
    handler can read them as ``record.mailfathom``)."""
    return {"mailfathom": {"action": action, **values}}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, carrying its ``extra`` fields (module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key in _STANDARD:
                continue
            if key == "mailfathom" and isinstance(value, dict):
                line.update(value)
            else:
                line[key] = value
        for key, value in line.items():  # a field may quote a connection string
            if isinstance(value, str):
                line[key] = redact(value)
        if record.exc_info:
            line["exc_info"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(line, default=repr, ensure_ascii=False)


def configure(level: str = "info", log_format: str = "text") -> None:
    """Send log records at ``level`` and above to stderr in ``log_format``, replacing
    whatever handlers the root logger had (so a command can be configured once);
    passwords in records are masked (:func:`mailfathom.redact.guard_logs`)."""
    guard_logs()
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
