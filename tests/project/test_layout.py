"""The package's layout rules (docs/architecture.md): no module imports another module's private names,
every ``__all__`` names what the module defines, source files stay small. The one-way import layers are
checked by import-linter (``lint-imports``, configured in pyproject.toml), run in CI next to these."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from _support import REPO

SRC = REPO / "src" / "studybench"
FILES = sorted(p for p in SRC.rglob("*.py") if "egg-info" not in str(p))
MAX_LINES = 800
LONGER = {
    # file -> why it may exceed MAX_LINES (keep this list short and say why in the closing note)
}


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_names_imported_from_other_modules(path: Path) -> None:
    module = _module(path)
    package = _package_of(module, path)
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level:
            continue
        src = node.module or ""
        if not src.startswith("studybench"):
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and src != module:
                bad.append(f"{src}.{alias.name}")
        if src.split(".")[-1].startswith("_") and not src.startswith(package):
            bad.append(src)
    assert not bad, f"{module} imports private names of other modules: {bad}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_dunder_all_is_true(path: Path) -> None:
    module = _module(path)
    if module.endswith("__main__"):
        return
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        return
    assert len(set(names)) == len(names), f"{module}.__all__ lists a name twice"
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_source_files_stay_small(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES or rel in LONGER, f"{rel} has {n} lines (more than {MAX_LINES}); split it or say why in LONGER"
