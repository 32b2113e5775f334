"""Which optional console sections an app supports, found from what the app offers.

Internal. Sections whose data exists in this build (and in the app) are shown;
the others are absent rather than empty pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailfathom.console import Console

__all__ = ["Features", "detect_features"]


@dataclass(frozen=True, slots=True)
class Features:
    """Which optional parts this console shows."""

    outbox: bool = False
    schedules: bool = False
    workers: bool = False
    inbox: bool = False


def detect_features(console: Console) -> Features:
    """The sections ``console`` can fill."""
    mf = console.mf
    return Features(
        outbox=hasattr(mf, "outbox"),
        schedules=hasattr(mf, "schedules"),
        workers=hasattr(mf, "workers"),
        inbox=console.inbox is not None,
    )
