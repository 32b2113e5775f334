"""The web console: server-rendered pages and a JSON API over the console service.

Public: :func:`create_app` (the console as an ASGI app to mount inside your own, with
your authentication through ``auth=``) and :class:`ConsoleUser` (what ``auth``
returns). The rest is internal, started by ``mailfathom web`` (and ``mailfathom dev``).
"""

from mailfathom.web.delegated import ConsoleUser
from mailfathom.web.features import Features
from mailfathom.web.mount import create_app
from mailfathom.web.security import Access

__all__ = ["Access", "ConsoleUser", "Features", "create_app"]
