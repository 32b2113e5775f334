"""Messages per second through the whole outbox pipeline: record → deliver → Sent.

Starts a local SMTP sink (Postfix's ``smtp-sink`` when given, else aiosmtpd's Sink
handler in a subprocess), records ``--messages`` emails (``record_many`` in batches
of ``--batch``, default 100; ``--batch 1``: one ``record`` call each), then runs
``--workers`` worker processes until every record is Sent, and prints the
recording rate, the delivery rate and the end-to-end rate.

    python bench/outbox_throughput.py --messages 2000 --workers 2
    python bench/outbox_throughput.py --batch 1   # one record() call per message
    python bench/outbox_throughput.py --database postgresql://postgres@127.0.0.1/postgres
    python bench/outbox_throughput.py --smtp-sink /path/to/usr/sbin/smtp-sink
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import quote

import psycopg

from mailfathom import MailFathom, OutgoingEmailStage


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_sink(smtp_sink: str | None, port: int) -> subprocess.Popen[bytes]:
    if smtp_sink:
        binary = Path(smtp_sink)
        env = dict(os.environ)
        bundled = binary.parent.parent / "lib" / "postfix"  # a `dpkg -x` tree
        if bundled.is_dir():
            env["LD_LIBRARY_PATH"] = str(bundled)
        command = [str(binary), f"127.0.0.1:{port}", "256"]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "nobody"]  # smtp-sink refuses to run as root
        process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    else:
        command = [
            sys.executable,
            "-m",
            "aiosmtpd",
            "-n",
            "-l",
            f"127.0.0.1:{port}",
            "-c",
            "aiosmtpd.handlers.Sink",
        ]
        process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"the SMTP sink did not start: {command}")


def _message(n: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "bench@example.com"
    msg["To"] = f"user{n}@example.com"
    msg["Subject"] = f"Benchmark message {n}"
    msg.set_content("A short transactional email body.\n" * 10)
    return msg


def _work(database_url: str, smtp_url: str, concurrency: int) -> None:
    with MailFathom(database_url, smtp_url=smtp_url) as app:
        app.worker(concurrency=concurrency).run(burst=True)


def run(
    database_url: str,
    messages: int,
    workers: int,
    concurrency: int,
    smtp_sink: str | None,
    *,
    batch: int = 100,
) -> dict[str, float]:
    """Run the pipeline once; returns the measured rates (messages per second)."""
    port = _free_port()
    sink = _start_sink(smtp_sink, port)
    smtp_url = f"smtp://127.0.0.1:{port}?starttls=off"
    try:
        with MailFathom(database_url, smtp_url=smtp_url) as app:
            app.migrate()
            started = time.perf_counter()
            if batch == 1:
                for n in range(messages):
                    app.outbox.record(_message(n))
            else:
                for first in range(0, messages, batch):
                    last = min(first + batch, messages)
                    app.outbox.record_many([_message(n) for n in range(first, last)])
            recorded = time.perf_counter()
            ctx = multiprocessing.get_context("spawn")
            procs = [
                ctx.Process(target=_work, args=(database_url, smtp_url, concurrency))
                for _ in range(workers)
            ]
            for proc in procs:
                proc.start()
            for proc in procs:
                proc.join()
            finished = time.perf_counter()
            counts = app.outbox.counts()
    finally:
        sink.terminate()
        sink.wait(10)
    sent = counts[OutgoingEmailStage.SENT]
    if sent != messages:
        raise SystemExit(f"only {sent} of {messages} were Sent: {counts}")
    return {
        "record_per_s": messages / (recorded - started),
        "deliver_per_s": messages / (finished - recorded),
        "end_to_end_per_s": messages / (finished - started),
    }


@contextmanager
def _fresh_database(given: str | None) -> Iterator[str]:
    """A fresh SQLite file, or a fresh schema in the given PostgreSQL database."""
    if given is None or not given.startswith("postgres"):
        with tempfile.TemporaryDirectory() as folder:
            yield given or f"sqlite:///{folder}/bench.db"
        return
    schema = f"mf_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(given, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in given else "?"
    try:
        yield f"{given}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(given, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=10, help="per worker")
    parser.add_argument(
        "--batch", type=int, default=100, help="messages per record_many (1: record each)"
    )
    parser.add_argument("--smtp-sink", help="path of Postfix's smtp-sink (default: aiosmtpd)")
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    with _fresh_database(args.database) as database_url:
        rates = run(
            database_url,
            args.messages,
            args.workers,
            args.concurrency,
            args.smtp_sink,
            batch=args.batch,
        )
    sink = "smtp-sink" if args.smtp_sink else "aiosmtpd"
    store = database_url.split(":", 1)[0]
    print(
        f"{args.messages} messages, {store}, batches of {args.batch}, "
        f"{args.workers} worker process(es) x "
        f"{args.concurrency}, sink {sink}: record {rates['record_per_s']:.0f}/s, "
        f"deliver {rates['deliver_per_s']:.0f}/s, end to end {rates['end_to_end_per_s']:.0f}/s"
    )


if __name__ == "__main__":
    main()
