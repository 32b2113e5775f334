"""Claims and leases: what a worker asks to take, keep and finish jobs.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
