"""Integrations with the frameworks applications already run: ``mailfathom.contrib.<framework>``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``mailfathom.contrib.django``, ``mailfathom.contrib.starlette`` (FastAPI too) and
``mailfathom.contrib.flask``; each imports its framework, so install the matching
extra (``pip install 'mailfathom[flask]'``). Each one builds a
:class:`~mailfathom.MailFathom` from the framework's own settings and database, so jobs
and email are written in the application's transactions. They run on the real store;
none is an in-memory fake.
"""
