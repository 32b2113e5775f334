"""An app whose import can pause, so that a test signals a worker in the middle of its start.

With ``MF_TEST_PAUSE_DIR`` set, importing this module (as ``mailfathom worker --app
startup_app:mf`` does) writes ``importing-<pid>`` in that folder and waits until a
file ``go`` appears there (60 s at most). Its one kind, ``startup.mark``, writes this
process's id to the file named in its payload.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mailfathom import JobContext, MailFathom

PAUSE_DIR = "MF_TEST_PAUSE_DIR"


def mark(ctx: JobContext, marker: str) -> None:
    """Write this process's id to ``marker``."""
    Path(marker).write_text(str(os.getpid()))


def _pause() -> None:
    folder = os.environ.get(PAUSE_DIR)
    if not folder:
        return
    Path(folder, f"importing-{os.getpid()}").write_text("")
    deadline = time.monotonic() + 60
    while not Path(folder, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


_pause()
mf = MailFathom()
mf.job("startup.mark")(mark)

#: An app on a database of its own, with a password (never connected to by the tests).
elsewhere = MailFathom("postgresql://postgres:app-s3cret@127.0.0.1:5432/postgres")
