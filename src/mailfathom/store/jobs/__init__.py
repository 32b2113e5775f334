"""Jobs: enqueue, reads of jobs and their history, audited operator moves.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
