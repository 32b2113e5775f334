"""Settings of the test project: the database comes from ``MF_TEST_DATABASE_URL``.

``sqlite:///path`` becomes a SQLite alias on that file; ``postgresql://…?options=…``
a PostgreSQL alias with the same ``search_path`` option, so the test's schema is
the project's. ``MF_TEST_SMTP_URL`` is where mailfathom delivers.
"""

import json
import os
from typing import Any

from psycopg.conninfo import conninfo_to_dict


def _database(url: str) -> dict[str, Any]:
    if url.startswith("sqlite:///"):
        name = url[len("sqlite:///") :]
        test = {"NAME": os.path.join(os.path.dirname(name), "test.sqlite3")}
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "TEST": test}
    params = conninfo_to_dict(url)
    options = {"options": params["options"]} if "options" in params else {}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.get("dbname", "postgres"),
        "USER": params.get("user", ""),
        "PASSWORD": params.get("password", ""),
        "HOST": params.get("host", ""),
        "PORT": params.get("port", ""),
        "OPTIONS": options,
    }


SECRET_KEY = "test-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "djproject.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "shop",
    "mailfathom.contrib.django",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": _database(os.environ["MF_TEST_DATABASE_URL"])}
DEFAULT_FROM_EMAIL = "Shop <shop@example.com>"
EMAIL_BACKEND = "mailfathom.contrib.django.EmailBackend"
TASKS = {"default": {"BACKEND": "mailfathom.contrib.django.TaskBackend"}}
MAILFATHOM = {
    "DATABASE": "default",
    "SMTP_URL": os.environ.get("MF_TEST_SMTP_URL"),
    "WEB_PORT": int(os.environ.get("MF_TEST_WEB_PORT", "8025")),
    **json.loads(os.environ.get("MF_TEST_MAILFATHOM_EXTRA", "{}")),
}
