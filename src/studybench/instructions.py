"""The instruction layers (placeholder; filled in by issue 13)."""

__all__: list[str] = []
