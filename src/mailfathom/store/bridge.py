"""Run the sync implementation from a coroutine, awaiting each statement on the loop.

Internal: not part of the public API. The rules of an enqueue or a record are written
once, as sync code that calls a :class:`~mailfathom.store.database.Cursor`. To run them
inside an application's async transaction, :func:`run_bridged` starts that code in a
greenlet on the event loop's own thread; the cursor it is given (an async driver's,
behind :func:`await_on_loop`) hands each awaitable back to the coroutine, which awaits
it and switches back in with the result. The loop is never blocked on the database
(every wait is an ``await``) and there is no thread hop: the technique SQLAlchemy's
asyncio extension uses, so one code path serves sync and async callers.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

from mailfathom.errors import ConfigurationError

__all__ = ["await_on_loop", "entered_on_loop", "run_bridged"]

T = TypeVar("T")


def _greenlet_module() -> Any:
    try:  # here, not at the top: greenlet is optional (the async extra)
        import greenlet
    except ImportError:  # pragma: no cover - the async extra installs it
        raise ConfigurationError(
            "writing inside an async connection's transaction needs greenlet: "
            "pip install 'mailfathom[async]'"
        ) from None
    return greenlet


async def run_bridged(function: Callable[[], T]) -> T:
    """``function()``, run so that its :func:`await_on_loop` calls are awaited here.

    The greenlet shares the caller's context variables (the current tracing span)."""
    greenlet = _greenlet_module()
    here = greenlet.getcurrent()
    child = _bridge_class(greenlet)(function, here)
    child.gr_context = here.gr_context
    result = child.switch()
    while not child.dead:
        try:
            value = await result
        except BaseException:
            result = child.throw(*sys.exc_info())
        else:
            result = child.switch(value)
    return result  # type: ignore[no-any-return]


def await_on_loop(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, awaited by the coroutine that runs this code
    (:func:`run_bridged`); outside one, a clear error instead of a blocked loop."""
    greenlet = _greenlet_module()
    current = greenlet.getcurrent()
    if not isinstance(current, _bridge_class(greenlet)):
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()  # never awaited: say so quietly instead of a "never awaited" warning
        raise RuntimeError(
            "an async connection was used outside mailfathom's async API: await the "
            "AsyncMailFathom method instead of calling the sync one"
        )
    return current.parent.switch(awaitable)  # type: ignore[no-any-return]


@contextmanager
def entered_on_loop(manager: AbstractAsyncContextManager[T]) -> Iterator[T]:
    """``async with manager`` for code run by :func:`run_bridged`: entered and exited
    with :func:`await_on_loop`, told of an error raised in the block as ``async with``
    would be."""
    value = await_on_loop(manager.__aenter__())
    try:
        yield value
    except BaseException:
        if not await_on_loop(manager.__aexit__(*sys.exc_info())):
            raise
    else:
        await_on_loop(manager.__aexit__(None, None, None))


_BRIDGE: Any = None


def _bridge_class(greenlet: Any) -> Any:
    """The greenlet subclass that marks code run by :func:`run_bridged` (made once)."""
    global _BRIDGE  # noqa: PLW0603 - made on first use: greenlet is an optional import
    if _BRIDGE is None:
        _BRIDGE = type("_Bridged", (greenlet.greenlet,), {"__doc__": "Run by run_bridged."})
    return _BRIDGE
