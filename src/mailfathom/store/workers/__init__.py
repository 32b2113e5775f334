"""The registry of running workers and their heartbeats.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
