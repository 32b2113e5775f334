"""Flow control: per-key limits on running jobs, their admin view, and the pacing of claims."""
