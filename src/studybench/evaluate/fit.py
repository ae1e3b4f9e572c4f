"""Planning turns within the context: the server's context length, and parents whose prompt does not fit.

Two limits bound prompt + completion of a turn: the ``context_budget`` asked for (the paper preset:
32,768 tokens) and the context length of the server (vLLM's ``max_model_len``, llama.cpp's
``n_ctx``: :func:`studybench.models.preflight.server_context_length`). :func:`plan_server_context`
reads the server's, makes the backend plan within the smaller of the two
(:meth:`~studybench.models.openai_backend.OpenAIBackend.context_cap`) and records both in the
manifest (``backend.server_context``).

A parent whose longest prompt leaves fewer completion tokens than the floor cannot be asked. It is
**skipped**, not a reason to stop the run: :func:`unfit_parents` names such parents (with the turn
and the numbers), the generation pass records each of their turns as failed with the reason
(:data:`SKIPPED_PREFIX`), the report lists them (``skipped_parents``) and the run is incomplete.
Only a selection where no parent fits is refused before any request.
"""

from __future__ import annotations

from typing import Any

from studybench.evaluate.spec import EvalError
from studybench.models import ChatBackend, ReferenceBackend
from studybench.models.preflight import server_context_length
from studybench.protocol import Artefacts, build_messages
from studybench.records import Parent, SubProblemRef
from studybench.store import SKIPPED_PARENT

__all__ = ["SKIPPED_PREFIX", "check_fit", "parent_fit_problem", "plan_server_context", "unfit_parents"]

SKIPPED_PREFIX = SKIPPED_PARENT
"""How the error of every turn of a skipped parent begins (the rest says which turn does not fit and why)."""


def parent_fit_problem(backend: ChatBackend, parent: Parent, art: Artefacts) -> str | None:
    """Why ``parent`` cannot be asked within the backend's budgets, or ``None`` when it fits.

    The last sub-problem has the longest prompt; with the model's earlier replies still unknown it is
    built with placeholders, so this is a lower bound on what the run will send (a later turn whose
    conversation grows past the budget fails when it comes, naming the numbers).

    Args:
        backend: the model's backend (one without ``budget_problem`` fits everything).
        parent: the parent.
        art: the method artefacts (the system message counts).

    Returns:
        ``"PARENT / SUB (turn N): REASON"``, or ``None``.
    """
    problem_of = getattr(backend, "budget_problem", None)
    if problem_of is None:
        return None
    subs = parent.subs()
    ref = SubProblemRef(parent, len(subs) - 1, subs[-1])
    problem = problem_of(build_messages(ref, [None] * ref.index, art))
    return None if problem is None else f"{parent.uid} / {ref.sub_id} (turn {ref.index + 1}): {problem}"


def unfit_parents(backend: ChatBackend, parents: list[Parent], art: Artefacts) -> dict[str, str]:
    """The parents that do not fit the budgets (:func:`parent_fit_problem`), by uid, in selection order.

    Args:
        backend: the model's backend.
        parents: the selection.
        art: the method artefacts.

    Returns:
        ``{parent uid: reason}``; empty when every parent fits.
    """
    out: dict[str, str] = {}
    for p in parents:
        problem = parent_fit_problem(backend, p, art)
        if problem is not None:
            out[p.uid] = problem
    return out


def check_fit(backend: ChatBackend, parents: list[Parent], art: Artefacts, what: str = "context_budget") -> list[str]:
    """Notes on the parents that will be skipped; refuse a selection where none fits.

    Args:
        backend: the model's backend.
        parents: the selection.
        art: the method artefacts.
        what: the field named when refusing.

    Returns:
        One note naming the parents skipped (and the first reason), or none.

    Raises:
        EvalError: no parent of the selection fits (field ``what``).
    """
    unfit = unfit_parents(backend, parents, art)
    if not unfit:
        return []
    first = next(iter(unfit.values()))
    if len(unfit) == len(parents):
        raise EvalError(f"{what}: {first}", what)
    shown = ", ".join(list(unfit)[:5]) + (f" and {len(unfit) - 5} more" if len(unfit) > 5 else "")
    return [f"{len(unfit)} of {len(parents)} parents do not fit and are skipped (their turns count as failed, the "
            f"run is incomplete): {shown}; e.g. {first}"]


def plan_server_context(backend: ChatBackend, described: dict[str, Any], parents: list[Parent],
                        art: Artefacts) -> list[str]:
    """Read the server's context length and plan every turn within it.

    The backend's cap on prompt + completion becomes ``min(context_budget, server's context)``
    (whenever a budget is sent); ``described["server_context"]`` (the manifest's backend) records
    ``{"length", "source", "cap"}``.

    Args:
        backend: the model's backend (anything but an OpenAI-compatible one is left alone).
        described: the manifest's backend description, updated in place.
        parents: the selection.
        art: the method artefacts.

    Returns:
        Lines to show once: the server's context when it lowered the cap, and the parents that no
        longer fit.

    Raises:
        EvalError: no parent of the selection fits the server's context (field ``context_budget``).
    """
    if isinstance(backend, ReferenceBackend) or not hasattr(backend, "server_context") or not hasattr(backend, "context_cap"):
        return []
    before = backend.context_cap()
    timeout = min(30.0, float(getattr(backend, "request_timeout", 30.0)))
    found = server_context_length(backend, timeout)
    if found is None:
        return []
    backend.server_context = found.length
    cap = backend.context_cap()
    described["server_context"] = {"length": found.length, "source": found.source, "cap": cap}
    if cap is None or cap == before:
        return []
    asked = "no cap" if before is None else f"{before}"
    lines = [f"the server's context is {found.length} tokens ({found.source}): every turn is planned within "
             f"prompt + completion <= {cap} (asked: {asked})"]
    return lines + check_fit(backend, parents, art)
