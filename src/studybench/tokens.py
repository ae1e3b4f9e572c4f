"""Token counting and token spans (placeholder; filled in by issue 13)."""

__all__: list[str] = []
