"""Operator views and actions over jobs, queues and workers."""
