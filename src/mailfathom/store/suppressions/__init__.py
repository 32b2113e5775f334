"""The suppression list: addresses never sent to again, and their audit trail.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
