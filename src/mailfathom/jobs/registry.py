"""Job kinds: the handler and the policy (queue, attempts, timeout, backoff) for each name.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from mailfathom.errors import InvalidInput
from mailfathom.jobs.flow.limits import KeyFunction
from mailfathom.jobs.retry import Backoff
from mailfathom.validate import check_max_attempts, check_name

__all__ = [
    "BUILTIN_PREFIX",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_QUEUE",
    "JobKind",
    "Registry",
    "build_kind",
    "check_name",
]

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 20
#: Largest result (its JSON text, in bytes) a handler may return: the app passes its
#: ``max_payload_bytes``, the payload's limit; this is that setting's default.
DEFAULT_MAX_RESULT_BYTES = 1_048_576

Isolation = Literal["thread", "process"]
Handler = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class JobKind:
    """A registered kind of job: how to run it and what to do when it fails."""

    name: str
    handler: Handler
    queue: str = DEFAULT_QUEUE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    timeout: timedelta | None = None
    backoff: Backoff = field(default_factory=Backoff)
    permanent: tuple[type[BaseException], ...] = ()
    isolation: Isolation = "thread"
    #: Computes each job's flow-control limit key from its payload at enqueue (None: none).
    limit_key: KeyFunction | None = None
    #: Largest result its handler may return, as JSON text in bytes (the payload limit).
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    #: True for an ``async def`` handler (or an object whose ``__call__`` is one); decided
    #: once here, not per job on the worker's hot path.
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        call = type(self.handler).__call__ if not inspect.isroutine(self.handler) else None
        is_async = inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(call)
        object.__setattr__(self, "is_async", is_async)


#: The names of the kinds mailfathom registers itself (``mailfathom.deliver``): they do
#: not make an app one that runs jobs of its own.
BUILTIN_PREFIX = "mailfathom."


class Registry:
    """Kinds known to this process, and the one rule for enqueueing a kind
    (:meth:`check_enqueue`): with ``strict`` (the ``strict_kinds`` setting), an app that
    registered a kind of its own may enqueue only registered kinds; an app with none (a
    producer that need not import its consumers' handlers) may enqueue any kind, which
    then uses the default policy."""

    def __init__(self, *, strict: bool = True) -> None:
        self._kinds: dict[str, JobKind] = {}
        #: The ``strict_kinds`` setting: whether :meth:`check_enqueue` refuses anything.
        self.strict = strict

    def add(self, kind: JobKind) -> None:
        """Register ``kind``; registering a name twice is refused."""
        if kind.name in self._kinds:
            raise InvalidInput(f"job kind {kind.name!r} is registered twice: keep one handler")
        self._kinds[kind.name] = kind

    def replace(self, kind: JobKind) -> None:
        """Put ``kind`` in place of the registered kind of that name (integrations use it to
        run handlers inside a framework's context); an unknown name is refused."""
        if kind.name not in self._kinds:
            raise InvalidInput(f"job kind {kind.name!r} is not registered: register it first")
        self._kinds[kind.name] = kind

    def get(self, name: str) -> JobKind | None:
        """The kind called ``name``, or None."""
        return self._kinds.get(name)

    def names(self) -> list[str]:
        """Every registered kind name, sorted."""
        return sorted(self._kinds)

    def own_names(self) -> list[str]:
        """The kinds the app registered itself, sorted (mailfathom's own left out)."""
        return [name for name in sorted(self._kinds) if not name.startswith(BUILTIN_PREFIX)]

    def check_enqueue(self, kind: str) -> None:
        """The rule every enqueue obeys (Python, ``mailfathom enqueue``, the JSON API and
        the console, Django's task backend): refuse ``kind`` when it is not registered,
        this app registered a kind of its own, and ``strict`` is on. A typo then fails
        at once, instead of a job waiting for a worker that never comes."""
        if not self.strict or kind in self._kinds:
            return
        own = self.own_names()
        if own:
            raise InvalidInput(
                f"job kind {kind!r} is not registered: registered kinds: {', '.join(own)}. "
                "Fix the name, register a handler for it (@mf.job), or, when another "
                "service runs it, set strict_kinds = false for this app "
                "(MAILFATHOM_STRICT_KINDS=false); nothing was enqueued"
            )


def build_kind(
    name: str,
    handler: Handler,
    *,
    queue: str = DEFAULT_QUEUE,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout: float | timedelta | None = None,
    backoff: Backoff | None = None,
    permanent: tuple[type[BaseException], ...] = (),
    isolation: Isolation = "thread",
    limit_key: KeyFunction | None = None,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> JobKind:
    """Validate a kind's policy and build it; every bad value gets a clear error."""
    check_name("job kind", name, longest=200)
    check_name("queue", queue, longest=100)
    check_max_attempts(max_attempts)  # the limit every enqueue checks, so none is refused
    if timeout is not None and not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=timeout)
    if timeout is not None and timeout <= timedelta(0):
        raise InvalidInput(f"timeout must be positive, not {timeout}")
    if isolation not in ("thread", "process"):
        raise InvalidInput(f"isolation must be 'thread' or 'process', not {isolation!r}")
    if not callable(handler):
        raise InvalidInput(f"the handler of {name!r} is not callable")
    if isolation == "process":
        _check_importable(name, handler)
    if limit_key is not None and not callable(limit_key):
        raise InvalidInput(
            f"limit_key of {name!r} must be a function of the payload returning the job's "
            f"key (a str or an int), not {limit_key!r}"
        )
    return JobKind(
        name=name,
        handler=handler,
        queue=queue,
        max_attempts=max_attempts,
        timeout=timeout,
        backoff=backoff or Backoff(),
        permanent=tuple(permanent),
        isolation=isolation,
        limit_key=limit_key,
        max_result_bytes=max_result_bytes,
    )


def _check_importable(name: str, handler: Handler) -> None:
    """A process-isolated handler is pickled by reference: it must be module-level."""
    qualname = getattr(handler, "__qualname__", "")
    module = getattr(handler, "__module__", None)
    if not qualname or "<locals>" in qualname or "<lambda>" in qualname or module == "__main__":
        raise InvalidInput(
            f"the handler of {name!r} ({qualname or handler!r}) runs with isolation='process', "
            "so it must be a module-level function a child process can import: move it to "
            "the top level of a module (not the script you run)"
        )
