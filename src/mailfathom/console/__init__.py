"""The operator console's service layer, shared by the CLI, the web pages and the JSON API.

Internal: users reach it through ``mailfathom`` commands and the web console.
"""

from mailfathom.console.query import HELD, JobQuery, format_duration, parse_duration
from mailfathom.console.service import ACTIONS, BulkResult, Console

__all__ = [
    "ACTIONS",
    "HELD",
    "BulkResult",
    "Console",
    "JobQuery",
    "format_duration",
    "parse_duration",
]
