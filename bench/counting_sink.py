"""The SMTP sink every email row delivers to, counting what really arrived.

A system's own table says what it believes it sent; the sink says what the server
got. Postfix's ``smtp-sink`` (C, one process, PIPELINING) appends every message it
receives to a dump file (``-D``), each preceded by a marker line (``-S``); a
measurement empties the dump before it runs (:meth:`CountingSink.mark`) and
afterwards checks that each message it sent arrived exactly once
(:meth:`CountingSink.check`): none missing, none twice, nothing unexpected. Messages
are told apart by their ``Subject`` header, unique within a measurement.

Why ``smtp-sink`` and not an aiosmtpd server: on this machine the smtplib loop runs
about 2,000-5,000 msg/s into ``smtp-sink`` with or without the dump (the dump goes to
``/dev/shm`` when there is one), and about 1,000 msg/s into an aiosmtpd server that
only reads the Subject: aiosmtpd would be the bottleneck of the ceiling row.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from email.parser import BytesHeaderParser
from pathlib import Path

from bench.environment import SmtpSink

__all__ = ["CountingSink", "SinkMismatch", "counting_sink"]

_MARKER = b"==mailfathom-bench-message=="
_SHOWN = 5
"""How many missing / duplicated subjects an error names."""


class SinkMismatch(RuntimeError):
    """The sink did not receive each message sent exactly once."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class CountingSink:
    """A running ``smtp-sink`` and its dump file."""

    def __init__(self, port: int, dump: Path) -> None:
        self.port = port
        """The loopback port it listens on."""
        self.dump = dump

    def mark(self) -> int:
        """Start counting afresh: empties the dump (between measurements no message is
        in transit, and ``smtp-sink`` opens the dump for each message it appends) and
        returns where :meth:`check` starts counting. A ``--full`` run would otherwise
        keep gigabytes of messages in ``/dev/shm``."""
        os.truncate(self.dump, 0)
        return 0

    def subjects(self, since: int = 0) -> Counter[str]:
        """How many times each Subject arrived after ``since`` (a :meth:`mark`)."""
        with self.dump.open("rb") as dump:
            dump.seek(since)
            text = dump.read()
        parser = BytesHeaderParser()
        found: Counter[str] = Counter()
        for chunk in text.split(_MARKER + b"\n")[1:]:
            found[str(parser.parsebytes(chunk).get("Subject", ""))] += 1
        return found

    def check(self, what: str, since: int, expected: Collection[str]) -> None:
        """Raise :class:`SinkMismatch` unless every subject in ``expected`` arrived
        exactly once after ``since`` and nothing else did."""
        found = self.subjects(since)
        wanted = set(expected)
        missing = sorted(wanted - found.keys())
        twice = sorted(subject for subject, count in found.items() if count > 1)
        unexpected = sorted(found.keys() - wanted)
        if not (missing or twice or unexpected):
            return
        parts = []
        for name, subjects in (
            ("missing", missing),
            ("received more than once", twice),
            ("never sent", unexpected),
        ):
            if subjects:
                shown = ", ".join(repr(s) for s in subjects[:_SHOWN])
                more = f" and {len(subjects) - _SHOWN} more" if len(subjects) > _SHOWN else ""
                parts.append(f"{len(subjects)} {name} ({shown}{more})")
        raise SinkMismatch(
            f"{what}: the sink received {sum(found.values())} messages for {len(wanted)} sent: "
            + "; ".join(parts)
        )


@contextmanager
def counting_sink(binary: SmtpSink) -> Iterator[CountingSink]:
    """``smtp-sink`` on a free loopback port, dumping every message; stopped on exit."""
    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="mf-bench-sink-", dir=shm if shm.is_dir() else None))
    folder.chmod(0o777)  # smtp-sink runs as nobody when started by root, and opens the dump there
    dump = folder / "dump"
    dump.touch()
    dump.chmod(0o666)
    port = _free_port()
    marker = _MARKER.decode() + "\\n"
    command = binary.command(port)
    command[-2:-2] = ["-S", marker, "-D", str(dump)]
    process = subprocess.Popen(
        command, env=binary.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stderr = process.stderr.read().decode() if process.stderr else ""
                    raise RuntimeError(f"smtp-sink did not start: {stderr.strip()}") from None
                time.sleep(0.05)
        yield CountingSink(port, dump)
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(folder, ignore_errors=True)
