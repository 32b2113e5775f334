"""Job payloads as JSON text that decodes to exactly what was given, or a clear refusal.

Internal. A payload is accepted only if reading it back gives the same Python
values with the same types, in the same key order: plain ``dict`` (at the top
any mapping, since it only carries keyword arguments), ``list``, ``str``,
``int``, finite ``float``, ``bool`` and ``None``. The stores keep the text as it
was written (SQLite ``TEXT``, PostgreSQL ``json``) and decode it with
``json.loads`` on both, so ``-0.0``, ``1e16`` and integers of any accepted size
come back unchanged.

Anything that would come back different — a non-string key (turned into a
string, and two of them may collide), a tuple (a list), a subclass such as an
``IntEnum`` (its base type), NaN or infinity, a lone surrogate or a NUL (the
databases cannot store them), an integer too long for Python to read back,
nesting deeper than :data:`MAX_DEPTH` — raises :class:`PayloadError` naming its
path (``payload['a'][1]: keys must be strings ...``) and saying what to do.

The common case, a small flat dict of strings and numbers, costs one pass over
the values plus ``json.dumps``; the text checks for NUL and surrogates run on
the encoded text, and only a payload that fails them is walked again to name
the place.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from mailfathom.errors import PayloadError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "encode", "encode_and_copy", "encode_value"]

#: Deepest nesting accepted, counting the payload object itself as level 1. Deeper
#: JSON breaks recursive readers (the console's renderer, other languages' parsers).
MAX_DEPTH = 64

#: Most decimal digits an integer may have: Python's default limit for converting
#: between int and text (``sys.int_max_str_digits``), which ``json.loads`` obeys.
MAX_INT_DIGITS = 4300

_INT_BOUND = 10**MAX_INT_DIGITS


def _make_dumps() -> Callable[[dict[str, Any]], str]:
    """``json.dumps`` with the options below, without making an encoder per call: the C
    encoder made once (a quarter of ``json.dumps``'s cost for a small payload)."""
    encoder = json.JSONEncoder(
        separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
    )
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    try:
        # What json.JSONEncoder.iterencode makes for every call: (markers, default,
        # string encoder, indent, key and item separators, sort_keys, skipkeys, allow_nan).
        string = json.encoder.encode_basestring
        chunks = make(None, encoder.default, string, None, ":", ",", False, False, False)
        join = "".join
        sample = {"a": [1, -0.0, 1e16, None, True, {"é": '\n"\\'}], "": 10**30}

        def dumps(payload: dict[str, Any]) -> str:
            return join(chunks(payload, 0))

        if dumps(sample) == encoder.encode(sample):
            return dumps
    except TypeError:  # pragma: no cover - no C encoder, or another signature
        pass
    return encoder.encode  # pragma: no cover


_dumps = _make_dumps()
_FLAT = frozenset((str, bool, type(None)))  # always fine as values (text checked later)
_BASES = (("a dict", dict), ("a list", list), ("a str", str), ("an int", int), ("a float", float))


class _Refused(Exception):
    """A value that cannot round-trip; ``path`` grows as the walk unwinds."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[object] = []


def encode(payload: Mapping[str, Any] | None, *, max_bytes: int) -> str:
    """Compact JSON text that decodes to exactly ``payload``, or :class:`PayloadError`.

    ``None`` means no arguments (``{}``). Nothing is written anywhere: callers
    encode every payload before they touch the store, so a refusal changes nothing.
    """
    return encode_and_copy(payload, max_bytes=max_bytes)[0]


def encode_and_copy(
    payload: Mapping[str, Any] | None, *, max_bytes: int
) -> tuple[str, dict[str, Any] | None]:
    """:func:`encode`, and for a flat payload (every value a ``str``, ``int``, ``float``,
    ``bool`` or ``None``) a new dict equal to it: exactly what decoding the text gives,
    for a tenth of the cost. None in its place when the payload nests."""
    if payload is None:
        return "{}", {}
    if type(payload) is not dict:
        if not isinstance(payload, Mapping):
            raise PayloadError(
                f"a payload must be a dict of keyword arguments, not {type(payload).__name__}"
            )
        payload = dict(payload)
    try:
        flat = _check_object(payload, 1)
    except _Refused as refused:
        raise PayloadError(_located(refused, "payload")) from None
    text = _dumps(payload)
    if "\\u0000" in text:  # json.dumps escapes NUL; the text may also hold a literal "\u0000"
        _refuse_text(payload, lambda s: "\x00" in s, _NUL)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        _refuse_text(payload, _has_surrogate, _SURROGATE)
        raise PayloadError(_SURROGATE.replace("{where}", "payload", 1)) from None
    if size > max_bytes:
        raise PayloadError(
            f"payload is {size} bytes, over the {max_bytes}-byte limit: store "
            "large data elsewhere and pass its id, or raise max_payload_bytes"
        )
    return text, dict(payload) if flat else None


def encode_value(value: object, *, max_bytes: int, root: str) -> str:
    """Compact JSON text that decodes to exactly ``value``, any JSON value (not only an
    object), under the payload's rules; or :class:`PayloadError` naming the place from
    ``root`` (``result['a'][1]: ...``). For what a handler returns."""
    kind = type(value)
    try:
        if kind is dict:
            _check_object(value, 1)  # type: ignore[arg-type]
        elif kind not in _FLAT:
            _check_value(value, 0)
    except _Refused as refused:
        raise PayloadError(_located(refused, root)) from None
    text = _dumps(value)  # type: ignore[arg-type]
    if "\\u0000" in text:
        _refuse_text(value, lambda s: "\x00" in s, _NUL, root)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        _refuse_text(value, _has_surrogate, _SURROGATE, root)
        raise PayloadError(_SURROGATE.replace("{where}", root, 1)) from None
    if size > max_bytes:
        raise PayloadError(f"{root} is {size} bytes as JSON, over the {max_bytes}-byte limit")
    return text


def _located(refused: _Refused, root: str) -> str:
    """The refusal's text with its place (and the value's name) filled in."""
    where = _where(refused.path[::-1], root)
    return refused.problem.replace("{root}", root, 1).replace("{where}", where, 1)


# -- the walk: types, keys, numbers and depth ------------------------------------------


def _check_object(value: dict[Any, Any], depth: int) -> bool:
    """Check ``value``; True when it holds no dict or list."""
    if depth > MAX_DEPTH:
        raise _Refused(_TOO_DEEP)
    flat = True
    for key, item in value.items():
        if type(key) is not str:
            refused = _Refused(_bad_key(key))
            refused.path.append(key)
            raise refused
        kind = type(item)
        if kind in _FLAT or (kind is int and -_INT_BOUND < item < _INT_BOUND):
            continue
        try:
            _check_value(item, depth)
        except _Refused as refused:
            refused.path.append(key)
            raise
        if kind is dict or kind is list:
            flat = False
    return flat


def _check_array(value: list[Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(_TOO_DEEP)
    for item in value:
        kind = type(item)
        if kind in _FLAT or (kind is int and -_INT_BOUND < item < _INT_BOUND):
            continue
        try:
            _check_value(item, depth)
        except _Refused as refused:  # the first place holding this very object failed
            refused.path.append(next(i for i, each in enumerate(value) if each is item))
            raise


def _check_value(value: object, depth: int) -> None:
    """Check ``value``, which sits inside a container at ``depth`` and is not in _FLAT."""
    if type(value) is int:
        if not -_INT_BOUND < value < _INT_BOUND:
            raise _Refused(
                f"{{where}}: an integer of more than {MAX_INT_DIGITS:,} digits cannot be read "
                "back: pass it as a string"
            )
    elif type(value) is float:
        if not math.isfinite(value):
            raise _Refused(
                f"{{where}}: {value!r} is not JSON: pass finite numbers only (or None, or a string)"
            )
    elif type(value) is dict:
        _check_object(value, depth + 1)
    elif type(value) is list:
        _check_array(value, depth + 1)
    else:
        raise _Refused(_bad_type(value))


def _bad_key(key: object) -> str:
    name = type(key).__name__
    if isinstance(key, str):
        return f"{{where}}: keys must be strings, not {name}: pass str(key)"
    return (
        f"{{where}}: keys must be strings, not {name}: use string keys (JSON keys are text, "
        "so this one would come back as a string, and could collide with another)"
    )


def _bad_type(value: object) -> str:
    name = type(value).__name__
    if isinstance(value, tuple):
        return f"{{where}}: a {name} would come back as a list: pass a list"
    for article, base in _BASES:
        if isinstance(value, base):
            return f"{{where}}: {name} would come back as {article}: pass {base.__name__}(value)"
    return (
        f"{{root}} is not JSON: {{where}} is a {name}; pass only dicts, lists, strings, "
        "finite numbers, booleans and None (convert other values first, e.g. a datetime "
        "to an ISO string)"
    )


_TOO_DEEP = (
    f"{{where}}: nested deeper than {MAX_DEPTH} levels (or it contains itself): flatten it, "
    "or store the data elsewhere and pass its id"
)


# -- text the databases cannot hold: found on the encoded text, then located -----------

_NUL = (
    "{where}: contains a NUL (\\u0000) character, which the database cannot store: remove it or "
    "encode the data (for example as base64)"
)
_SURROGATE = (
    "{where}: contains a lone surrogate, which is not valid Unicode and cannot be stored: fix the "
    "text (for example decode its bytes with errors='replace')"
)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refuse_text(
    payload: object, bad: Callable[[str], bool], problem: str, root: str = "payload"
) -> None:
    """Raise naming the first key or string in ``payload`` that ``bad`` matches."""
    path = _find(payload, bad)
    if path is not None:
        raise PayloadError(problem.replace("{where}", _where(path, root), 1))


def _find(value: object, bad: Callable[[str], bool]) -> list[object] | None:
    if isinstance(value, str):
        return [] if bad(value) else None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and bad(key):
            return [key]
        found = _find(item, bad)
        if found is not None:
            return [key, *found]
    return None


def _where(path: list[object], root: str = "payload") -> str:
    """``payload['a'][1]`` (long paths and long keys shortened)."""
    parts = [_part(step) for step in path]
    if len(parts) > 8:
        parts = [*parts[:4], "...", *parts[-2:]]
    return root + "".join(parts)


def _part(step: object) -> str:
    shown = repr(step)
    return f"[{shown if len(shown) <= 40 else shown[:36] + '...'}]"
