"""The commands that hints and error messages tell people to run, as this deployment runs them.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A plain install runs ``mailfathom migrate`` and ``mailfathom worker --app module:attr``;
a framework integration runs the same commands through its own entry point, with the
app already chosen (Django: ``python manage.py mailfathom migrate``, ``python manage.py
mailfathom worker``). The integration says so once, with :func:`use_command`; every
hint is then built with :func:`command`, so no message names a command that does not
work here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["command", "use_command"]


@dataclass(frozen=True, slots=True)
class _Entry:
    prefix: str
    app_given: bool


_DEFAULT = _Entry(prefix="mailfathom", app_given=False)
_entry = _DEFAULT

#: Subcommands that need ``--app`` to know the job kinds (when the app is not given).
_NEEDS_APP = frozenset({"worker", "web"})


def use_command(prefix: str, *, app_given: bool) -> None:
    """Hints name ``prefix SUBCOMMAND`` from now on; ``app_given``: the entry point already
    knows the app, so no ``--app`` is shown. ``use_command("mailfathom", app_given=False)``
    goes back to the plain command."""
    global _entry  # noqa: PLW0603 - one entry point per process
    _entry = _Entry(prefix=prefix, app_given=app_given)


def command(subcommand: str) -> str:
    """The command line to suggest for ``subcommand`` (``"migrate"``, ``"worker"``, …)."""
    line = f"{_entry.prefix} {subcommand}"
    if not _entry.app_given and subcommand.split(" ", 1)[0] in _NEEDS_APP:
        line += " --app module:attr"
    return line
