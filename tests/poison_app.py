"""Handlers that raise what no handler should: the catalogue tests/test_poison_handlers.py runs.

Each poison is named; :func:`make` builds it. Process-isolated handlers are
pickled by reference, so the handlers that raise them live in this module.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn

from mailfathom import JobContext, PermanentFailure, TransientFailure


class BadStr(Exception):
    """Its ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("str() is broken")


class NotStr(Exception):
    """Its ``__str__`` returns something that is not text."""

    def __str__(self) -> str:
        return 42  # type: ignore[return-value]  # noqa: PLE0307


class ExitingStr(Exception):
    """Its ``__str__`` raises SystemExit."""

    def __str__(self) -> str:
        raise SystemExit("from __str__")


class Unprintable:
    """An object neither ``str()`` nor ``repr()`` can print."""

    def __repr__(self) -> str:
        raise RuntimeError("repr() is broken")

    __str__ = __repr__


class BadCause(Exception):
    """Its ``__cause__`` raises when read."""

    @property
    def __cause__(self) -> BaseException | None:  # type: ignore[override]
        raise RuntimeError("no cause for you")


class BadContext(Exception):
    """Its ``__context__`` raises when read."""

    @property
    def __context__(self) -> BaseException | None:  # type: ignore[override]
        raise RuntimeError("no context for you")


class BadTraceback(Exception):
    """Its ``__traceback__`` is not a traceback."""

    @property
    def __traceback__(self) -> object:  # type: ignore[override]
        return "not a traceback"


class BadNotes(Exception):
    """Its ``__notes__`` raises SystemExit when read."""

    @property
    def __notes__(self) -> list[str]:  # type: ignore[override]
        raise SystemExit("no notes for you")


class Poison(BaseException):
    """Not an Exception at all."""


class Lazy(TransientFailure):
    """A TransientFailure that never called ``super().__init__``: no reason, no retry_after."""

    def __init__(self) -> None:
        pass


def _cyclic() -> BaseException:
    first, second = ValueError("first"), ValueError("second")
    first.__cause__ = second
    second.__cause__ = first
    return first


POISONS: dict[str, Callable[[], BaseException]] = {
    "base_exception": lambda: Poison("poisoned"),
    "system_exit": lambda: SystemExit(3),
    "keyboard_interrupt": KeyboardInterrupt,
    "generator_exit": GeneratorExit,
    "cancelled": lambda: asyncio.CancelledError("by the handler"),
    "group": lambda: BaseExceptionGroup("several", [SystemExit(1), KeyboardInterrupt()]),
    "str_raises": lambda: BadStr("disk full"),
    "str_not_str": lambda: NotStr("disk full"),
    "str_exits": lambda: ExitingStr("disk full"),
    "unprintable_args": lambda: ValueError(Unprintable(), 2),
    "cause_raises": lambda: BadCause("disk full"),
    "context_raises": lambda: BadContext("disk full"),
    "traceback_lies": lambda: BadTraceback("disk full"),
    "notes_raise": lambda: BadNotes("disk full"),
    "cyclic_cause": _cyclic,
    "nul_and_surrogate": lambda: ValueError("a\x00b\ud800c"),
    "huge_message": lambda: ValueError("x" * 5_000_000),
    "permanent_unprintable": lambda: PermanentFailure(Unprintable()),  # type: ignore[arg-type]
    "transient_without_init": Lazy,
}

RETRY_AFTERS: dict[str, object] = {
    "timedelta_max": timedelta.max,
    "ten_thousand_years": timedelta(days=3_650_000),
    "huge_float": 1e20,
    "huge_int": 10**30,
    "inf": math.inf,
    "nan": math.nan,
    "negative": -5,
    "negative_timedelta": timedelta(seconds=-5),
    "text": "soon",
    "bool": True,
    "list": [1],
    "a_year": timedelta(days=365),
}


def make(poison: str) -> BaseException:
    """The poison named ``poison``, ready to raise."""
    return POISONS[poison]()


def raise_poison(ctx: JobContext, poison: str) -> NoReturn:
    """Raise the named poison (``sys.exit`` itself for ``system_exit``)."""
    if poison == "system_exit":
        sys.exit(3)
    raise make(poison)


async def raise_poison_async(ctx: JobContext, poison: str) -> NoReturn:
    """Await once, then raise the named poison."""
    await asyncio.sleep(0)
    if poison == "system_exit":
        sys.exit(3)
    raise make(poison)


def slow_down(ctx: JobContext, retry_after: str) -> NoReturn:
    """``TransientFailure("slow down", retry_after=<the named value>)``."""
    raise TransientFailure("slow down", retry_after=RETRY_AFTERS[retry_after])  # type: ignore[arg-type]


def fine(ctx: JobContext) -> None:
    """Return: the sibling that must be recorded once, whatever its neighbours did."""
