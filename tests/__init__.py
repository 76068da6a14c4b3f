"""Example-based unit tests."""
