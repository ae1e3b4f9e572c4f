"""MkDocs hook: the Sphinx roles in the package's docstrings, read for the API reference.

The docstrings name objects the Sphinx way (``:class:`~studybench.evaluate.spec.EvalSpec```), which
mkdocstrings leaves as text. After a page is rendered this hook turns each role into code: a fully
qualified ``studybench.`` name must exist (it is imported; a name that does not is a warning, so
``mkdocs build --strict`` fails on a stale docstring reference) and becomes a link where the API reference
shows that object; a short name stays plain code.
"""

from __future__ import annotations

import html
import importlib
import logging
import re
from functools import cache
from typing import Any

log = logging.getLogger("mkdocs.hooks.roles")

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):<code>(?P<tilde>~?)(?P<name>[\w.]+)(?P<call>\(\))?</code>")


@cache
def exists(name: str) -> bool:
    """Whether the dotted ``name`` is a module of the package or an attribute reachable from one."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                # a field of a pydantic model or a dataclass is documented but not a class attribute
                fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", None) or {}
                annotations = getattr(obj, "__annotations__", {})
                if attr in fields or attr in annotations:
                    return True
                return False
            obj = getattr(obj, attr)
        return True
    return False


def on_page_content(html_text: str, page: Any, **kwargs: Any) -> str:
    """Rewrite the Sphinx roles of one rendered page (MkDocs' ``on_page_content`` event)."""

    def replace(m: re.Match[str]) -> str:
        name = m.group("name")
        title = name.rsplit(".", 1)[-1] if m.group("tilde") else name
        code = f"<code>{html.escape(title)}{m.group('call') or ''}</code>"
        if not name.startswith("studybench."):
            return code
        if not exists(name):
            log.warning("%s: a docstring names %s, which does not exist", page.file.src_uri, name)
            return code
        return f'<autoref identifier="{html.escape(name)}" optional>{code}</autoref>'

    return ROLE.sub(replace, html_text)
