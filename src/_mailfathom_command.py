"""The ``mailfathom`` command's first instant, before the package is imported.

Importing mailfathom takes about a second; a SIGTERM or SIGINT in that second would
kill a worker by the signal. Both are blocked here, first thing, so that they wait
(pending) until :func:`mailfathom.jobs.signals.hold` installs its recorder and unblocks
them: a worker stopped at any point of its start then exits 0, having claimed nothing.
Only the window before the interpreter runs its first line is left, as for any program.
"""

from __future__ import annotations

import signal

__all__ = ["main"]


def main() -> None:
    """Block SIGTERM/SIGINT, then run the command line (:func:`mailfathom.cli.main`)."""
    if hasattr(signal, "pthread_sigmask"):  # POSIX
        signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGTERM, signal.SIGINT))
    from mailfathom.cli import main as run

    run()


if __name__ == "__main__":
    main()
