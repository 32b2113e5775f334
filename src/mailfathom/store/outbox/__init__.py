"""The outbox: records, operator moves and delivery attempts of outgoing emails.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
