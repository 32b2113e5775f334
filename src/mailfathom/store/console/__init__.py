"""The read-only queries of the gauges and the health check.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
