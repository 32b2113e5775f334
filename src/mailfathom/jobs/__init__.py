"""The durable job queue: states, policy, enqueue/claim/finish, operator views, the worker."""
