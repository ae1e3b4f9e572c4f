"""Test and benchmark helpers: a local OpenAI-compatible stub server with scripted replies and faults.

Nothing here is used by an evaluation run; it exists so that the model backends, the runner and the
resume logic can be tested end to end without a GPU or network access. The names below are imported
lazily so that ``python -m studybench.testing.stub_server`` runs the module only once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from studybench.testing.stub_server import Fault, Reply, Script, StubServer, start_stub_server

__all__ = ["Fault", "Reply", "Script", "StubServer", "start_stub_server"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from studybench.testing import stub_server

        return getattr(stub_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
