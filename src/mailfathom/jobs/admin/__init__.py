"""Operator views and actions over jobs, queues and workers.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
