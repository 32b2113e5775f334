"""``{% mailfathom_console_url %}``: where the operator console is, for the admin's link.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

from django import template

from mailfathom.contrib.django.app import config

__all__ = ["mailfathom_console_url", "register"]

register = template.Library()


@register.simple_tag
def mailfathom_console_url() -> str:
    """``MAILFATHOM["CONSOLE_URL"]``, else the address ``manage.py mailfathom web`` serves."""
    return config().console_url
