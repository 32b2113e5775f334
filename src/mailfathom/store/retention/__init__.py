"""Retention: the pruner lease, compaction and deletion in small batches.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
