"""Recurring jobs: cron expressions, the scheduler every worker runs, and their admin view."""
