"""A process that enqueues on an SQLite file each time the test asks, for fault tests.

Run as ``python sqlite_fault_child.py <path>``: each line on stdin is one request,
answered on stdout by ``ok <id>`` or ``fail <StoreError text>``. The test changes the
file between requests (its permissions, its size limit) and reads what happened.
"""

from __future__ import annotations

import sys

from mailfathom import MailFathom, StoreError


def main() -> None:
    with MailFathom(f"sqlite:///{sys.argv[1]}") as mf:
        for line in sys.stdin:
            size = int(line.strip() or 0)
            try:
                job = mf.enqueue("fault.probe", {"filler": "x" * size})
            except StoreError as exc:
                print("fail", exc, flush=True)
            else:
                print("ok", job.id, flush=True)


if __name__ == "__main__":
    main()
