"""Flow control: per-key limits on running jobs, their admin view, and the pacing of claims.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""
