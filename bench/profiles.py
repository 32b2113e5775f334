"""Reading py-spy's raw (collapsed-stack) profiles of the mailfathom workers.

``python -m bench --profile DIR`` attaches ``py-spy record --idle --format raw`` to
every mailfathom processing worker once it is ready; this module then says where
the worker's main thread spent its time, attributed to the deepest mailfathom
frame of each sample (so time inside the driver is charged to the line that
called it: a COMMIT, a claim statement, a JSON decode).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

__all__ = ["summarise_profile"]

_OURS = "mailfathom/"


def summarise_profile(path: Path, top: int = 15) -> str:
    """The ``top`` mailfathom lines by share of the samples that ran mailfathom code."""
    lines: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if _OURS not in stack or not count.isdigit():
            continue  # the driver pool's own threads, idle by design: not the worker's time
        frames = stack.split(";")
        ours = [frame for frame in frames if _OURS in frame]
        lines[ours[-1] if ours else frames[-1]] += int(count)
        total += int(count)
    if total == 0:
        return f"{path.name}: no samples in mailfathom code"
    shown = [f"{path.name}: {total} samples in mailfathom code (idle waits included)"]
    shown += [f"  {100 * n / total:5.1f} %  {frame}" for frame, n in lines.most_common(top)]
    return "\n".join(shown)
