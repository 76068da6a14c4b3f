"""The paper's listings as runnable examples: ``python -m paper_examples``."""
