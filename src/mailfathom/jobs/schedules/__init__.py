"""Recurring jobs: cron expressions, the scheduler every worker runs, and their admin view.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
