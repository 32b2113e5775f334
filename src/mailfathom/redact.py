"""Passwords out of every message: the one place connection strings are masked.

Internal. :func:`redact` masks, in any text:

- a URL's password (``scheme://user:***@host``), up to the URL's last ``@`` (a
  password with an unencoded ``@``), also when the URL lacks a slash or its scheme
  (``postgresql:/u:p@h``, ``u:p@h/db``);
- the value of a ``password=`` or ``sslpassword=`` option, in a URL's query or a
  libpq keyword string (``host=db password='s e c'``), quoted or not;
- what a driver quotes as a host before an ``@`` (``failed to resolve host
  'pass@127.0.0.1'``: the rest of a password whose ``@`` was not percent-encoded).

It is applied where such text leaves mailfathom: the message of every
:class:`~mailfathom.errors.MailFathomError` (so every error wrapped at the store
boundary, every configuration error, and the CLI's reports of them), the CLI's other
error output, and the log records of the ``mailfathom`` and ``psycopg`` loggers
(:func:`guard_logs`: message and traceback; the JSON format masks the fields it
writes too).
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import Any

__all__ = ["MASK", "guard_logs", "redact"]

#: What stands in for a secret.
MASK = "***"

_SECRET_OPTION = re.compile(
    r"""(?P<key>\b(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&'"]+)""",
    re.IGNORECASE,
)
_QUOTED_HOST = re.compile(
    r"""(?P<lead>\b(?:host(?:\s+name)?|hostaddr|server\s+at)\s*[=:]?\s*["']?)[^\s"']*@""",
    re.IGNORECASE,
)
_WORD = re.compile(r"\S+")
# what a URL's password already is in a redacted URL, or in a hint (user:password@host)
_PLACEHOLDERS = frozenset({MASK, "password", "PASSWORD"})
# In a word, before its last "@": a scheme (and up to three slashes, or "//" alone), a
# user, a ":" and the password; or, without a scheme, user:password (not "//…", which
# is a scheme's).
_LEAD = r"""^[("'<\[{,=]*"""
_USER = r"[\w.%~+\-]*:"
_USERINFO = (
    re.compile(
        rf"(?P<lead>{_LEAD}[A-Za-z][A-Za-z0-9+.\-]*(?::/{{0,3}}|//){_USER})(?P<secret>[^<].*)$"
    ),
    re.compile(rf"(?P<lead>{_LEAD}{_USER})(?P<secret>[^</].*)$"),
)


def redact(text: str) -> str:
    """``text`` with every password it may carry replaced by ``***`` (module docstring)."""
    if "@" not in text and "assword" not in text and "ASSWORD" not in text:
        return text  # the common case, at the cost of three scans
    text = _SECRET_OPTION.sub(lambda m: m.group("key") + MASK, text)
    text = _QUOTED_HOST.sub(lambda m: m.group("lead") + MASK + "@", text)
    return _WORD.sub(_redact_word, text)


def _redact_word(match: re.Match[str]) -> str:
    word = match.group(0)
    at = word.rfind("@")
    if at <= 0:
        return word
    for pattern in _USERINFO:
        found = pattern.match(word[:at])
        if found is not None:
            if found.group("secret") in _PLACEHOLDERS:
                return word
            return found.group("lead") + MASK + word[at:]
    return word


class _RedactedRecords:
    """A log record factory that redacts the records of ``prefixes``' loggers."""

    def __init__(self, previous: Any, prefixes: tuple[str, ...]) -> None:
        self.previous = previous
        self.prefixes = prefixes

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = self.previous(*args, **kwargs)
        name = record.name  # None for logging.makeLogRecord({...})
        if isinstance(name, str) and name.startswith(self.prefixes):
            try:
                _redact_record(record)
            except Exception:  # masking must never cost the record itself
                record.msg, record.args = "(a log message that could not be masked)", None
        return record


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a broken call: logging reports it when it formats the record
        return
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
        shown = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = redact(shown)
        if clean != shown:  # formatters use exc_text when it is set
            record.exc_text = clean


_lock = threading.Lock()


def guard_logs() -> None:
    """Redact every record of the ``mailfathom`` and ``psycopg`` loggers (whose
    connection warnings quote what the driver saw) from now on, in this process.

    Installed once, as a log record factory wrapped around the current one, so every
    handler (the application's own included) sees redacted records."""
    with _lock:
        current = logging.getLogRecordFactory()
        if not isinstance(current, _RedactedRecords):
            logging.setLogRecordFactory(_RedactedRecords(current, ("mailfathom", "psycopg")))
