"""The app ``mailfathom worker --processes N`` runs in the ``-p4`` benchmark rows.

Its URL comes from ``--database`` (``MailFathom()`` reads ``MAILFATHOM_DATABASE_URL``).
Each worker process notes, in the folder ``MF_BENCH_MARKS`` names, the moment its
first job ran, so the driver can time the run from the first job on (as the
harness-started rows time it from ``go``, after their start-up).
"""

from __future__ import annotations

import os
import time
from typing import Any

from mailfathom import MailFathom

KIND = "bench.noop"

mf = MailFathom()
_first: list[float] = []


@mf.job(KIND)
def noop(ctx: Any, i: int = 0, t: float | None = None) -> None:
    """A no-op job; the first one in this process leaves its start moment behind."""
    if not _first:
        _first.append(time.monotonic())
        folder = os.environ.get("MF_BENCH_MARKS")
        if folder:
            with open(os.path.join(folder, str(os.getpid())), "w", encoding="ascii") as out:
                out.write(repr(_first[0]))
