"""A handler's return value as the JSON text its Succeeded job stores, or a ResultError.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

The value must read back as itself, under the payload's rules
(:mod:`mailfathom.jobs.payload`): dicts with string keys, lists, strings, integers,
finite floats, booleans and None, nested at most 64 levels, and at most the app's
``max_payload_bytes`` as JSON. ``None`` stores nothing (the column stays NULL). The
text is made on the thread (or in the child process) that ran the handler, never on
the worker's loop.
"""

from __future__ import annotations

from mailfathom.errors import PayloadError
from mailfathom.jobs.failures import ResultError
from mailfathom.jobs.payload import encode_value
from mailfathom.jobs.registry import JobKind

__all__ = ["encode_result", "encode_returned"]


def encode_result(kind: JobKind, value: object) -> str | None:
    """The JSON text to store for ``value`` (None for None), or :class:`ResultError`
    naming the value's type and saying what to return instead."""
    if value is None:
        return None
    return encode_returned(kind.name, value, kind.max_result_bytes)


def encode_returned(name: str, value: object, max_bytes: int) -> str | None:
    """:func:`encode_result` for the kind called ``name`` with its limit (a child process
    gets these rather than the kind)."""
    if value is None:
        return None
    try:
        return encode_value(value, max_bytes=max_bytes, root="result")
    except PayloadError as exc:
        raise ResultError(
            f"the handler of {name!r} returned a {type(value).__name__} that cannot be "
            f"stored as the job's result ({exc}): return JSON data (dicts, lists, strings, "
            "numbers, booleans or None) of at most max_payload_bytes, e.g. an id rather "
            "than a large object; the handler's work was done, so fix it before requeueing"
        ) from None
