"""Benchmarks that print figures (no timed tests)."""
