"""Template tags of the mailfathom app's admin pages.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
