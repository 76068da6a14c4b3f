"""Mutation testing of the gate: ``python -m mutation`` (``make mutation``)."""
