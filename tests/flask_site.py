"""A Flask app for ``flask mailfathom`` run as a user runs it (test_flask_command.py).

Its database is ``MAILFATHOM_DATABASE_URL``; ``site.mark`` writes the app's
``SITE_NAME`` and the worker process's id to a file, so a test sees that the job ran in
the app's context and in which process.
"""

from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, current_app

from mailfathom import JobContext
from mailfathom.contrib.flask import MailFathomFlask

app = Flask("flask_site")
app.config["SITE_NAME"] = "Flask Site"
mailfathom = MailFathomFlask(app)


@mailfathom.job("site.mark")
def mark(ctx: JobContext, path: str) -> None:
    """Write the site's name (from the app context) and this process's id to ``path``."""
    Path(path).write_text(f"{current_app.config['SITE_NAME']} {os.getpid()}")
