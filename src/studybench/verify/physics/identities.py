r"""Physical-constant identities applied by substitution (docs/protocol.md section 5, symbols).

A gold written with ``\hbar`` and a prediction written with ``h / (2\pi)`` are the same answer; so
are ``\mu_0`` and ``1 / (\varepsilon_0 c^2)``, ``k`` and ``k_B``, ``\beta`` and ``1 / (k_B T)``. The
rule: a symbol ``a`` with a known identity ``a = f(b, ...)`` is replaced by ``f`` on one side only
when that side uses ``a``, the other side does not, and the other side uses the symbols of ``f``
(so the substitution is what makes the two sides speak of the same quantities). Constants are
never deleted or set to 1. Worker side (SymPy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from studybench.verify.physics.definitions import Definitions

__all__ = ["identities", "reconcile"]

Builder = Callable[[Callable[[str], Any]], Any]


@functools.cache
def identities() -> list[tuple[str, tuple[str, ...], Builder, str]]:
    """The identities, built on first use (SymPy is imported lazily).

    Returns:
        ``(symbol key, keys the other side must use, builder, description)`` tuples, in the order they
        are tried.
    """
    import sympy

    pi = sympy.pi
    return [
        ("h", ("\\hbar",), lambda s: 2 * pi * s("\\hbar"), "h = 2 pi hbar"),
        ("\\hbar", ("h",), lambda s: s("h") / (2 * pi), "hbar = h/(2 pi)"),
        ("k", ("k_{B}",), lambda s: s("k_{B}"), "k = k_B"),
        ("k_{B}", ("k",), lambda s: s("k"), "k_B = k"),
        ("\\mu_{0}", ("\\epsilon_{0}", "c"), lambda s: 1 / (s("\\epsilon_{0}") * s("c") ** 2), "mu_0 = 1/(eps_0 c^2)"),
        ("\\epsilon_{0}", ("\\mu_{0}", "c"), lambda s: 1 / (s("\\mu_{0}") * s("c") ** 2), "eps_0 = 1/(mu_0 c^2)"),
        ("c", ("\\mu_{0}", "\\epsilon_{0}"), lambda s: 1 / sympy.sqrt(s("\\mu_{0}") * s("\\epsilon_{0}")), "c = 1/sqrt(mu_0 eps_0)"),
        ("\\beta", ("k_{B}", "T"), lambda s: 1 / (s("k_{B}") * s("T")), "beta = 1/(k_B T)"),
        ("\\beta", ("k", "T"), lambda s: 1 / (s("k") * s("T")), "beta = 1/(k T)"),
        ("\\beta", ("v", "c"), lambda s: s("v") / s("c"), "beta = v/c"),
        ("\\gamma", ("v", "c"), lambda s: 1 / sympy.sqrt(1 - s("v") ** 2 / s("c") ** 2), "gamma = 1/sqrt(1 - v^2/c^2)"),
        ("k_{e}", ("\\epsilon_{0}",), lambda s: 1 / (4 * pi * s("\\epsilon_{0}")), "k_e = 1/(4 pi eps_0)"),
        ("\\mu_{B}", ("e", "\\hbar", "m_{e}"), lambda s: s("e") * s("\\hbar") / (2 * s("m_{e}")), "mu_B = e hbar/(2 m_e)"),
        ("\\mu_{B}", ("e", "h", "m_{e}"), lambda s: s("e") * s("h") / (4 * pi * s("m_{e}")), "mu_B = e h/(4 pi m_e)"),
        ("R", ("N_{A}", "k_{B}"), lambda s: s("N_{A}") * s("k_{B}"), "R = N_A k_B"),
        ("Y_{00}", (), lambda s: 1 / (2 * sympy.sqrt(pi)), "Y_00 = 1/(2 sqrt(pi))"),
    ]


def _keys(exprs: list[Any], names: dict[str, str]) -> set[str]:
    out: set[str] = set()
    for e in exprs:
        for s in getattr(e, "free_symbols", ()):
            k = names.get(str(s))
            if k is not None:
                out.add(k)
    return out


def reconcile(
    gold: list[Any], pred: list[Any], aliases: Any, *, definitions: Definitions | None
) -> tuple[list[Any], list[Any], list[str]]:
    """Apply the item's definitions, then the identities, between the two sides of one comparison.

    Args:
        gold: the gold's SymPy objects, built with the shared alias table ``aliases``.
        pred: the prediction's SymPy objects, built with the same table.
        aliases: the :func:`studybench.verify.reading.aliasing.new_aliases` table both sides were built with.
        definitions: the verification's definitions (substituted first, on both sides), or ``None``.

    Returns:
        ``(gold, pred, applied)``: the rewritten objects and the identities used (``"h = 2 pi hbar"``).
    """
    import sympy

    applied: list[str] = []
    if definitions is not None:
        gold, pred = definitions.substitute(gold, pred, aliases)  # the item's own definitions

    def sym(key: str) -> Any:
        return sympy.Symbol(aliases.alias(key)[len("\\mathrm{") : -1])

    # psi(x, t) on one side, psi on the other: the same function, arguments left implicit
    names = aliases.keys_by_name()
    gk, pk = _keys(gold, names), _keys(pred, names)
    for mine, other, is_gold in ((gk, pk, True), (pk, gk, False)):
        for key in sorted(k for k in mine if k.startswith("call:")):
            base = key[len("call:") :].split("|", 1)[0]
            if key not in other and base in other and not any(o.startswith("call:" + base + "|") for o in other):
                rep = {sym(key): sym(base)}
                if is_gold:
                    gold = [e.xreplace(rep) if hasattr(e, "xreplace") else e for e in gold]
                else:
                    pred = [e.xreplace(rep) if hasattr(e, "xreplace") else e for e in pred]
                applied.append(f"{base}(...) -> {base}")
    for _ in range(3):
        names = aliases.keys_by_name()
        gk, pk = _keys(gold, names), _keys(pred, names)
        changed = False
        for key, needs, build, desc in identities():
            for mine, other, is_gold in ((gk, pk, True), (pk, gk, False)):
                # k is Boltzmann's k_B only beside a temperature, or when it is the whole answer
                thermal = key not in ("k", "k_{B}") or ("T" in mine and "T" in other) or mine == {key} or other == {"k", "k_{B}"} - {key}
                if thermal and key in mine and key not in other and all(n in other for n in needs):
                    target = sym(key)
                    value = build(sym)
                    if is_gold:
                        gold = [e.xreplace({target: value}) if hasattr(e, "xreplace") else e for e in gold]
                    else:
                        pred = [e.xreplace({target: value}) if hasattr(e, "xreplace") else e for e in pred]
                    applied.append(desc)
                    changed = True
                    break
            if changed:
                break
        if not changed:
            break
    return gold, pred, applied
