"""The web console: server-rendered pages and a JSON API over the console service.

Internal: started by ``mailfathom web`` (and ``mailfathom dev``).
"""

from mailfathom.web.app import create_app
from mailfathom.web.features import Features
from mailfathom.web.security import Access

__all__ = ["Access", "Features", "create_app"]
