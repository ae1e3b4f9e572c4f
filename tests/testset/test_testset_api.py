"""studybench.testset (was studybench.build, issue 26 item 3): the stage sub-packages and their public
faces, the one-way layering inside, and the deprecated ``studybench.build`` alias that old scripts use."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings

import pytest
from _support import REPO

import studybench.testset as testset

SRC = REPO / "src" / "studybench"
STAGES = ["corpus", "knowledge", "retrieval", "verification", "guidance", "filters"]


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_is_a_package_with_a_public_face(stage: str) -> None:
    mod = importlib.import_module(f"studybench.testset.{stage}")
    assert hasattr(mod, "__path__"), f"{stage} is not a package"
    assert "2.1" in (mod.__doc__ or ""), f"studybench.testset.{stage}: the docstring names no paper section"
    assert mod.__all__, f"studybench.testset.{stage} exports nothing"
    for name in mod.__all__:
        obj = getattr(mod, name)
        home = getattr(obj, "__module__", None)
        if home is not None and callable(obj):
            assert home.startswith(f"studybench.testset.{stage}."), f"{stage}.{name} comes from {home}"


def test_the_top_level_names_every_stage_and_loads_them_lazily() -> None:
    assert set(STAGES) <= set(testset.__all__)
    assert "2.1" in (testset.__doc__ or "")
    # a fresh interpreter: importing the corpus must not load the filters (they load the evaluation)
    code = ("import sys, studybench.testset.corpus.books; "
            "print('studybench.testset.filters' in sys.modules, 'studybench.evaluate' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
    assert testset.decompose is importlib.import_module("studybench.testset.knowledge.points").decompose
    with pytest.raises(AttributeError):
        _ = testset.no_such_stage


def test_no_stage_module_is_shadowed_by_a_name_its_package_exports() -> None:
    """``import a.b.c as m`` binds ``getattr(a.b, 'c')``: a re-exported function named like its module
    would replace the module (``knowledge.decompose`` the function, not the module)."""
    for init in sorted((SRC / "testset").rglob("__init__.py")):
        pkg = init.parent
        mods = {p.stem for p in pkg.glob("*.py")} | {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
        name = ".".join(init.relative_to(SRC.parent).parent.parts)
        exported = set(importlib.import_module(name).__all__)
        for clash in mods & exported:
            assert importlib.import_module(f"{name}.{clash}") is getattr(importlib.import_module(name), clash), (
                f"{name}.{clash} is both a module and a re-exported name")


def test_nothing_in_the_package_imports_the_deprecated_alias() -> None:
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "build" and path.parent.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "studybench.build" or n.startswith("studybench.build.") for n in names), path


def _old_names() -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return sorted(importlib.import_module("studybench.build").MOVED)


@pytest.mark.parametrize("old", _old_names())
def test_the_old_module_paths_still_import_the_moved_module(old: str) -> None:
    alias = importlib.import_module("studybench.build")
    new = importlib.import_module(alias.MOVED[old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.modules.pop(f"studybench.build.{old}", None)
        got = importlib.import_module(f"studybench.build.{old}")
    assert got is new, "the alias must be the module itself (so monkeypatching it patches the running code)"
    assert got.__spec__.name == alias.MOVED[old], "the alias overwrote the moved module's spec"
    assert any(issubclass(w.category, DeprecationWarning) and alias.MOVED[old] in str(w.message) for w in caught)
    for public in new.__all__:
        assert getattr(got, public) is getattr(new, public)


def test_the_old_from_import_form_works_in_a_fresh_interpreter() -> None:
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from studybench.build.corpus import scan_books\nexcept DeprecationWarning as e:\n"
            "    print('warned:', e)\n"
            "warnings.simplefilter('ignore')\n"
            "from studybench.build.corpus import scan_books\nfrom studybench.build import leakage\n"
            "print(scan_books.__module__, leakage.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "warned: studybench.build is deprecated: use studybench.testset" in out
    assert "studybench.testset.corpus.books studybench.testset.guidance.leakage" in out
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("studybench.build.no_such_module")
