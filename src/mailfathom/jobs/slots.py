"""Fast constructors for the frozen, slotted dataclasses the worker makes once per job.

Internal. A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (a look-up and a call per field, plus the keyword
arguments); the worker makes a ``Job``, a ``JobContext`` and a ``Finished`` for
every attempt, so those few microseconds are a good part of a no-op job's cost.
The functions made here fill the slots directly, in straight-line code generated
once (as :mod:`dataclasses` generates ``__init__``), and make the very same objects:
equal, hashable and frozen as ever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["positional_builder", "row_builder"]

T = TypeVar("T")


def _setters(cls: type[Any]) -> tuple[list[str], dict[str, Any]]:
    names = [field.name for field in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for index, name in enumerate(names):
        namespace[f"_put{index}"] = _slot(cls, name).__set__
    return names, namespace


def _slot(cls: type[Any], name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__name__} has no slot {name!r}")  # pragma: no cover


def positional_builder(cls: type[T], *, defaults: bool = True) -> Callable[..., T]:
    """``build(field1, field2, …)``: every field of ``cls`` in order, positionally
    (fields with a plain default may be left out, unless ``defaults`` is False;
    ``default_factory`` ones may not)."""
    names, namespace = _setters(cls)
    params: list[str] = []
    for index, field in enumerate(dataclasses.fields(cast(Any, cls))):
        if defaults and field.default is not dataclasses.MISSING:
            namespace[f"_default{index}"] = field.default
            params.append(f"v{index}=_default{index}")
        else:
            params.append(f"v{index}")
    body = [f"def build({', '.join(params)}, /):", "    obj = _new(_cls)"]
    body += [f"    _put{index}(obj, v{index})" for index in range(len(names))]
    body.append("    return obj")
    exec("\n".join(body), namespace)  # noqa: S102 - generated from field names only
    build: Callable[..., T] = namespace["build"]
    return build


def row_builder(cls: type[T], converters: dict[str, Callable[[Any], Any]]) -> Callable[[Any], T]:
    """``build(row)``: ``cls`` from a mapping holding exactly its fields, each field in
    ``converters`` passed through its converter."""
    names, namespace = _setters(cls)
    body = ["def build(row, /):", "    obj = _new(_cls)"]
    for index, name in enumerate(names):
        value = f"row[{name!r}]"
        if name in converters:
            namespace[f"_convert{index}"] = converters[name]
            value = f"_convert{index}({value})"
        body.append(f"    _put{index}(obj, {value})")
    body.append("    return obj")
    exec("\n".join(body), namespace)  # noqa: S102 - generated from field names only
    build: Callable[[Any], T] = namespace["build"]
    return build
