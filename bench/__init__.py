"""Reproducible benchmarks, side by side with the peers (see docs/benchmarks.md)."""
