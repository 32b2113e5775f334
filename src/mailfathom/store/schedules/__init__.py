"""Recurring schedules and the jobs their ticks enqueue.

Internal. One concern of the store (see :mod:`mailfathom.store.sql_store`).
"""
