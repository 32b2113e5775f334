"""A real delivery worker process, for the crash tests.

``python delivery_worker.py DATABASE_URL SMTP_URL`` builds a MailFathom and runs a
worker until nothing is due. With ``MAILFATHOM_TEST_CRASH_AT=<point>`` in its
environment the submitter SIGKILLs this process at that point of the submission.
"""

from __future__ import annotations

import sys

from mailfathom import MailFathom


def main() -> None:
    database_url, smtp_url = sys.argv[1], sys.argv[2]
    with MailFathom(database_url, smtp_url=smtp_url, lease=1.0) as app:
        app.worker(concurrency=1, lease=1.0).run(burst=True)


if __name__ == "__main__":
    main()
