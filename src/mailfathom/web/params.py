"""Reading whole numbers typed into query strings and forms.

Internal. ``str.isdigit()`` alone accepts characters such as "²" that
``int()`` then refuses; every web module checks numbers with :func:`is_whole_number`
so such input is a clear 400 rather than a 500.
"""

from __future__ import annotations

__all__ = ["is_whole_number"]


def is_whole_number(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits (what ``int()`` will surely accept)."""
    return text.isascii() and text.isdigit()
