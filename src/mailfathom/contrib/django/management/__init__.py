"""Django management commands of the mailfathom app.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
