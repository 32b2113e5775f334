"""Which optional console sections an app supports, found from what the app offers.

Internal. Sections whose data exists in this build (and in the app's schema)
are shown; the others are absent rather than empty pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailfathom.web.app import Features

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["detect_features"]


def detect_features(mf: MailFathom, *, inbox: bool = False) -> Features:
    """The sections ``mf`` can fill."""
    return Features(
        outbox=hasattr(mf, "outbox"),
        schedules=hasattr(mf, "schedules"),
        workers=hasattr(mf, "workers"),
        inbox=inbox,
    )
