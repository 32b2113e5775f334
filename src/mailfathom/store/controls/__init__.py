"""Operator controls: queues paused and resumed fleet-wide.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
