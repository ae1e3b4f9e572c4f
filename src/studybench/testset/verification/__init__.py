"""Placeholder: the public API follows in the next commit."""
