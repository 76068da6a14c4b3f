"""Property tests: one file per lemma, theorem or law; generators in generators.py."""
