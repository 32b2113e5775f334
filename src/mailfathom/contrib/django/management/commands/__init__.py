"""The ``manage.py mailfathom`` command.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
