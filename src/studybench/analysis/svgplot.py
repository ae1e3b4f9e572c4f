"""Plots as inline ``<svg>`` elements for the HTML pages (the run report, the leaderboard).

Every plot is drawn with matplotlib's Agg backend under the same settings, so the same data gives the
same bytes: a fixed ``svg.hashsalt`` and element ids prefixed with a name per plot (so the ids of two
plots on one page never collide), no date or creator metadata, text kept as ``<text>`` (``svg.fonttype: none``) and never
parsed as mathtext (labels are user input: a ``$`` in a method name stays a ``$``). The XML
declaration, the DOCTYPE (it names a DTD URL) and the namespace URLs are dropped, so a page that
inlines the plot fetches nothing. The root element carries ``role="img"`` and an ``aria-label``.

Needs matplotlib (the ``analysis`` extra).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["bars_svg", "curve_svg", "figure_svg"]


def figure_svg(draw: Callable[[Any, Any], None], *, figsize: tuple[float, float], label: str, salt: str) -> str:
    """Draw one figure and return it as an inline ``<svg>`` element.

    Args:
        draw: called as ``draw(fig, ax)`` on a fresh figure with one axes.
        figsize: inches.
        label: the plot's ``aria-label`` (escaped here).
        salt: a name that makes the element ids of this plot unique on a page (letters, digits, ``-``, ``_``).

    Returns:
        The ``<svg ...>...</svg>`` text, without XML declaration, DOCTYPE, metadata or namespace URLs.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rc = {"svg.hashsalt": f"studybench-{salt}", "svg.fonttype": "none", "font.size": 9, "text.parse_math": False}
    with matplotlib.rc_context(rc):
        fig, ax = plt.subplots(figsize=figsize)
        try:
            draw(fig, ax)
            fig.tight_layout()
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.find("<svg"):]  # drop the XML declaration and the DOCTYPE (it names a DTD URL)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", svg)  # inline SVG in HTML needs no namespace URLs
    # element ids (figure_1, patch_1, ...) repeat from figure to figure: prefix them, and every reference to them
    ref = re.compile(r'(\sid="|href="#|url\(#)')
    svg = re.sub(r"<[^<>]*>", lambda tag: ref.sub(lambda m: f"{m.group(1)}{salt}-", tag.group(0)), svg)  # tags only, not text
    return svg.replace("<svg", f'<svg role="img" aria-label="{html.escape(label, quote=True)}"', 1)


def bars_svg(names: Sequence[str], series: Sequence[tuple[str, Sequence[float | None], Sequence[float | None] | None]],
             *, title: str, label: str, salt: str, ylabel: str = "%", ymax: float | None = 100.0) -> str:
    """A grouped bar chart: one group per name, one bar per series (optional ±1 std error bars).

    Args:
        names: the groups (x axis), in order; tick labels longer than 28 characters are cut with "…".
        series: ``(legend, values, stds)`` per series; a ``None`` value draws no bar, ``stds`` may be ``None``.
        title: the axes title.
        label: the ``aria-label``.
        salt: see :func:`figure_svg`.
        ylabel: the y axis label.
        ymax: the top of the y axis (``None``: automatic).

    Returns:
        The inline ``<svg>`` element.
    """
    colors = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")
    n = max(1, len(series))

    def draw(fig: Any, ax: Any) -> None:
        w = 0.8 / n
        for si, (legend, values, stds) in enumerate(series):
            xs = [i - 0.4 + w * (si + 0.5) for i in range(len(names))]
            ys = [0.0 if v is None else v for v in values]
            err = None if stds is None or all(s is None for s in stds) else [s or 0.0 for s in stds]
            ax.bar(xs, ys, w, label=legend, color=colors[si % len(colors)], yerr=err, capsize=2 if err else 0)
        ax.set_xticks(list(range(len(names))))
        ax.set_xticklabels([n if len(n) <= 28 else n[:27] + "…" for n in names], rotation=30 if len(names) > 2 else 0, ha="right" if len(names) > 2 else "center")
        if ymax is not None:
            ax.set_ylim(0, ymax)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if len(series) > 1:
            ax.legend(loc="upper right", fontsize=8)

    return figure_svg(draw, figsize=(max(5.0, 0.5 * n * len(names) + 1.5), 3.4), label=label, salt=salt)


def curve_svg(xs: Sequence[int], series: Sequence[tuple[str, Sequence[float | None], Sequence[float | None] | None]],
              *, title: str, label: str, salt: str, xlabel: str, ylabel: str = "%") -> str:
    """Lines over ``xs`` with markers, each with a shaded ±1 std band where ``stds`` are given.

    Args:
        xs: the x values.
        series: ``(legend, means, stds)`` per line; ``stds`` ``None`` (or all ``None``): no band.
        title, label, salt: see :func:`bars_svg`.
        xlabel, ylabel: the axis labels.

    Returns:
        The inline ``<svg>`` element.
    """
    colors = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")

    def draw(fig: Any, ax: Any) -> None:
        for si, (legend, means, stds) in enumerate(series):
            c = colors[si % len(colors)]
            ys = [float("nan") if m is None else m for m in means]
            ax.plot(list(xs), ys, marker="o", color=c, label=legend)
            if stds is not None and any(s is not None for s in stds):
                sd = [s or 0.0 for s in stds]
                ax.fill_between(list(xs), [y - s for y, s in zip(ys, sd, strict=True)], [y + s for y, s in zip(ys, sd, strict=True)],
                                color=c, alpha=0.2, linewidth=0)
        ax.set_xticks(list(xs))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 100)
        ax.set_title(title)
        ax.legend(loc="lower right", fontsize=8)

    return figure_svg(draw, figsize=(5.0, 3.2), label=label, salt=salt)
