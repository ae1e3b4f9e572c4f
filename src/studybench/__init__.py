"""studybench: the StudyBench evaluation protocol, verifier and test-set tooling."""

__version__ = "0.1.0"
