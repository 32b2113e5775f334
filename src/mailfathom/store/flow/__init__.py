"""Flow control: limit definitions, usage, and the limited claim.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
