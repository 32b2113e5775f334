"""Reading whole numbers typed into query strings and forms.

Internal. ``str.isdigit()`` alone accepts characters such as "²" that ``int()`` then
refuses, and ``int()`` refuses more than 4300 digits; every web module checks numbers
with :func:`is_whole_number` and a length, so such input is a clear 400 rather than a
500. Importing the module registers the ``{name:id}`` path convertor (1 to 19 digits).
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

from mailfathom.errors import InvalidInput

__all__ = ["MAX_ID", "IdConvertor", "NameConvertor", "is_whole_number", "paging_id"]

#: Ids are signed 64-bit integers on both stores.
MAX_ID = 2**63 - 1


def is_whole_number(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits (what ``int()`` will surely accept)."""
    return text.isascii() and text.isdigit()


def paging_id(text: str | None, name: str) -> int | None:
    """A paging cursor (``before`` / ``after``): None when absent, else an id from 1 to
    :data:`MAX_ID`; anything else is :class:`InvalidInput` (a 400, never a database error)."""
    if text is None or text == "":
        return None
    if not is_whole_number(text) or len(text) > 19 or not 1 <= int(text) <= MAX_ID:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise InvalidInput(f"{name} must be a positive whole number below 2**63, not {shown!r}")
    return int(text)


class IdConvertor(Convertor[int]):
    """The ``{name:id}`` path parameter: 1 to 19 ASCII digits (longer ones do not match, so
    they are a 404, never an ``int()`` of thousands of digits)."""

    regex = "[0-9]{1,19}"

    def convert(self, value: str) -> int:
        """The digits as an int."""
        return int(value)

    def to_string(self, value: int) -> str:
        """The int as digits."""
        return str(int(value))


register_url_convertor("id", IdConvertor())


class NameConvertor(Convertor[str]):
    """The ``{name:name}`` path parameter of a queue, schedule or limit: any text, slashes
    and line breaks included (``path`` stops at a line break, which made such a name a 404
    the API does not document); the handler checks the name and refuses a bad one (400)."""

    regex = "[\\s\\S]+"

    def convert(self, value: str) -> str:
        """The name as given."""
        return value

    def to_string(self, value: str) -> str:
        """The name as given."""
        return str(value)


register_url_convertor("name", NameConvertor())
