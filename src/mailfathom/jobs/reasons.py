"""How a handler's failure reads: text that is always built and always storable.

Internal. Whatever a handler raises runs code of its own when it is printed: its
``__str__`` may raise or return something that is not text, its ``__cause__``,
``__context__``, ``__notes__`` or ``__traceback__`` may raise or lie, its chain may
be a cycle. Nothing here lets any of that escape: every function returns readable
text, falling back step by step (the exception's arguments, its bare frames, its
type's name) and saying what failed. The text is also one every store keeps: a
NUL becomes ``\\x00``, a lone surrogate its ``\\udXXX`` escape, and a message or
traceback past its limit is cut, saying by how much.

The one exception let through is :class:`~mailfathom.jobs.signals.HardStop`, a
second SIGTERM/SIGINT arriving while the worker's main thread reads a failure.
"""

from __future__ import annotations

import traceback
from types import TracebackType

from mailfathom.jobs.failures import PermanentFailure, TransientFailure
from mailfathom.jobs.signals import HardStop

__all__ = [
    "MESSAGE_LIMIT",
    "TRACEBACK_LIMIT",
    "describe_error",
    "error_type",
    "reason_of",
    "storable",
    "text_of",
    "traceback_text",
    "type_name",
]

#: characters of a failure's message that are kept (the rest is cut, saying how much)
MESSAGE_LIMIT = 4_000
#: characters of a traceback that are kept: the first fifth and the last four fifths
TRACEBACK_LIMIT = 64_000

_MARK_ROOM = 40  # characters kept free for the "… [N more characters]" mark
_QUALNAME = type.__dict__["__qualname__"]
_MODULE = type.__dict__["__module__"]
_TRACEBACK = BaseException.__dict__["__traceback__"]


def storable(text: str, limit: int = MESSAGE_LIMIT, *, keep_end: bool = False) -> str:
    """``text`` with NUL and lone surrogates escaped, so that both stores accept it, and
    cut to at most ``limit`` characters (keeping its start, or with ``keep_end`` its
    start and its end), saying how much was cut. Applying it twice changes nothing."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit:
        return text
    keep = limit - _MARK_ROOM
    if keep_end:
        head = keep // 5
        return f"{text[:head]}\n… [{len(text) - keep} characters cut] …\n{text[head - keep :]}"
    return f"{text[:keep]}… [{len(text) - keep} more characters]"


def type_name(cls: type) -> str:
    """The class's qualified name, read past any metaclass trickery."""
    try:
        name = _QUALNAME.__get__(cls)
        return storable(name, 500) if type(name) is str else "?"
    except HardStop:
        raise
    except BaseException:
        return "?"


def error_type(error: BaseException) -> str:
    """``module.QualName`` of the exception's class (``QualName`` for builtins), storable."""
    cls = type(error)
    name = type_name(cls)
    try:
        module = _MODULE.__get__(cls)
    except HardStop:
        raise
    except BaseException:
        module = None
    if type(module) is str and module != "builtins":
        name = f"{module}.{name}"
    return storable(name, 500)


def text_of(value: object) -> str:
    """``str(value)`` as plain text, or a readable stand-in saying what went wrong.

    When ``str()`` raises or returns something that is not text, an exception's own
    arguments are tried (``BaseException.__str__``), then ``<unprintable: …>``.
    """
    try:
        text = str(value)
        return text if type(text) is str else str.__str__(text)
    except HardStop:
        raise
    except BaseException as exc:
        failure = f"str() raised {type_name(type(exc))}"
    plain = _plain_text(value) if issubclass(type(value), BaseException) else ""
    return f"{plain} ({failure})" if plain else f"<unprintable: {failure}>"


def _plain_text(error: object) -> str:
    """What ``BaseException.__str__`` makes of the exception's arguments ('' if nothing)."""
    try:
        plain = BaseException.__str__(error)  # type: ignore[arg-type]
    except HardStop:
        raise
    except BaseException:
        return ""
    return plain if type(plain) is str else ""


def describe_error(error: BaseException) -> str:
    """``Type: message`` (or just ``Type``), as attempts and logs show a failure; never raises."""
    name = type_name(type(error))
    text = text_of(error)
    return storable(f"{name}: {text}" if text else name)


def reason_of(error: BaseException) -> str:
    """The reason an attempt records for ``error``: a Permanent/TransientFailure's own
    ``reason`` when it has one, else :func:`describe_error`."""
    if issubclass(type(error), (PermanentFailure, TransientFailure)):
        try:
            reason = getattr(error, "reason", None)
        except HardStop:
            raise
        except BaseException:
            reason = None
        if reason is not None:
            text = text_of(reason)
            if text:
                return storable(text)
    return describe_error(error)


def traceback_text(error: BaseException) -> str:
    """The traceback Python would print for ``error``, chain and notes included.

    When the exception's own attributes make that impossible, its bare frames
    (read from the interpreter's slot, not through any property) and its
    description, saying why the rest is missing.
    """
    try:
        text = "".join(traceback.format_exception(error))
    except HardStop:
        raise
    except BaseException as exc:
        text = _bare_traceback(error, type_name(type(exc)))
    return storable(text, TRACEBACK_LIMIT, keep_end=True)


def _bare_traceback(error: BaseException, failure: str) -> str:
    frames = ""
    try:
        tb = _TRACEBACK.__get__(error)
        if isinstance(tb, TracebackType):
            frames = "Traceback (most recent call last):\n" + "".join(traceback.format_tb(tb))
    except HardStop:
        raise
    except BaseException:
        frames = ""
    return (
        f"{frames}{describe_error(error)}\n"
        f"(its cause, context and notes are left out: formatting them raised {failure})\n"
    )
