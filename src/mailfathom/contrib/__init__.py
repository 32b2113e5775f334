"""Integrations with the frameworks applications already run: ``mailfathom.contrib.<framework>``.

Each one builds a :class:`~mailfathom.MailFathom` from the framework's own settings
and database, so jobs and email are written in the application's transactions. They
run on the real store; none is an in-memory fake.
"""
