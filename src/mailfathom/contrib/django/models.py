"""mailfathom's Django models: no tables (``managed = False``), only names and permissions.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

mailfathom's tables come from its own migrations; these models give the Django admin
its "Jobs" and "Emails" entries (read-only views over ``mf.jobs`` and ``mf.outbox``,
see ``admin.py``) and carry the permissions of the operator moves, granted to users
and groups like any Django permission. Having a models module also makes Django send
this app ``post_migrate``, so ``manage.py migrate`` creates mailfathom's tables even
in a project where no other installed app has models.
"""

from __future__ import annotations

from django.db import models

__all__ = ["Console", "Email", "Job"]


class Job(models.Model):
    """The admin's "Jobs" (no table): viewing, and the requeue / drop / release moves."""

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = (
            ("requeue_job", "Can requeue a dead-lettered job"),
            ("drop_job", "Can drop a dead-lettered job"),
            ("release_job", "Can release a held job"),
        )


class Email(models.Model):
    """The admin's "Emails" (no table): viewing, and resolving an unknown outcome."""

    class Meta:
        managed = False
        default_permissions = ("view",)
        permissions = (("resolve_email", "Can resolve an email's unknown outcome"),)


class Console(models.Model):
    """No table: the holder of the ``mailfathom.operate_console`` permission, which lets a
    staff user act in the console served by ``with_console`` (not only look)."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = (("operate_console", "Can act on jobs and email in the mailfathom console"),)
