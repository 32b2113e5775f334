"""The Django app config: label ``mailfathom``; discovers ``jobs`` modules, links the console.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules

# the tasks module registers the ``django.task`` kind on the app when imported
import mailfathom.contrib.django.tasks  # noqa: F401
from mailfathom import hints
from mailfathom.contrib.django.app import built_app, close_app, config, get_app

__all__ = ["MailFathomConfig"]

#: The admin index with a link to the console (it extends ``admin/index.html``).
ADMIN_INDEX_TEMPLATE = "mailfathom/admin_index.html"


class MailFathomConfig(AppConfig):
    """Registers the project's job handlers and the admin's link when Django starts.

    Every installed app's ``jobs`` module is imported (as the admin imports
    ``admin`` modules), so handlers declared there with ``@job`` are known to
    workers and producers alike. When ``django.contrib.admin`` is installed and its
    site has no index template of its own, the admin index (staff only) gains a
    link to the operator console, wherever this app sits in ``INSTALLED_APPS``.
    ``manage.py migrate`` on mailfathom's alias also creates or upgrades mailfathom's
    tables (as Django's test runner does when it creates a test database).
    """

    name = "mailfathom.contrib.django"
    label = "mailfathom"
    verbose_name = "mailfathom"
    default = True
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Import every installed app's ``jobs`` module; add the console link to the admin;
        make hints name ``python manage.py mailfathom …`` (with no ``--app``)."""
        hints.use_command("python manage.py mailfathom", app_given=True)
        autodiscover_modules("jobs")
        post_migrate.connect(_migrate_mailfathom, dispatch_uid="mailfathom.contrib.django")
        if apps.is_installed("django.contrib.admin"):
            # here, not at the top: django.contrib.admin may be imported only when it is
            # installed, and only once the app registry is ready
            from django.contrib import admin

            if admin.site.index_template is None:
                admin.site.index_template = ADMIN_INDEX_TEMPLATE


def _migrate_mailfathom(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """After ``manage.py migrate`` on mailfathom's alias: mailfathom's own migrations, once
    per run (Django sends the signal for each app with models; this app has one, so the
    signal comes even when no other app is installed).

    An app built only for this (the one in use was on another database, as when Django's
    test runner creates a test database) is closed afterwards: a pool left open on the
    test database would keep the runner from dropping it on PostgreSQL, even when no
    test uses mailfathom.
    """
    if sender.label != MailFathomConfig.label or using != config().alias:
        return
    before = built_app()
    app = get_app()
    app.migrate()
    if app is not before:
        close_app()
