"""The durable job queue: states, policy, enqueue/claim/finish, operator views, the worker.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
