"""Code from the environment never runs (issue 24 item 4).

- Verifier workers import only the installed packages: a ``sympy.py`` on the parent's ``PYTHONPATH``
  used to shadow the real SymPy inside every worker (verdicts ``incorrect: internal error
  (ImportError)``, recall on the dev pairs 1.0 -> 0.5, exit 0).
- ``python -m studybench`` imports no module from the working directory (``-m`` puts it first on
  ``sys.path``; a ``secrets.py`` there was imported by the main process).

Both are checked with real subprocesses, and the module names planted are generated: every top-level
module the process in question imports (a worker; the command's main process), not a hand-made list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import studybench

SRC = str(Path(studybench.__file__).resolve().parent.parent)

TRANSPARENT_TRAP = """import os, sys
open(os.path.join({marks!r}, __name__ + "-" + str(os.getpid())), "w").close()
_here = os.path.dirname(os.path.abspath(__file__))
_saved = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[__name__]
try:
    import importlib
    _real = importlib.import_module(__name__)
finally:
    sys.path[:] = _saved
sys.modules[__name__] = _real
"""
"""A module that records who imported it, then hands over to the real module of that name (so that the
process importing it keeps working and the test sees every import, not only the first)."""

MARKING_TRAP = """import os
open(os.path.join({marks!r}, __name__ + "-" + str(os.getpid())), "w").close()
raise ImportError("planted in the working directory")
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


def _bare_interpreter_modules() -> set[str]:
    """What an interpreter has loaded before any code runs (they cannot be shadowed by files)."""
    out = subprocess.run([sys.executable, "-I", "-c", "import sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return {m.partition(".")[0] for m in out.split()} | set(sys.builtin_module_names)


PROBE = """import json, sys
import studybench.cli, studybench.files, studybench.report, studybench.verify  # what verify-file's main process loads
from studybench.verify import Verifier
parent = sorted({m.partition(".")[0] for m in sys.modules})
with Verifier(workers=1, timeout=120.0) as v:
    verdicts = v.verify_responses([(p["gold"], p["response"], p["answer_type"], "") for p in json.loads(sys.argv[1])])
    origin = v.pool.call("origin", (), 120.0)
print(json.dumps({"parent": parent, "worker": origin["modules"], "correct": [x[1].correct for x in verdicts]}))
"""
"""Loads what a worker loads to verify PAIRS, and reports its top-level modules."""

PAIRS = [  # every pair needs a worker (not string-equal): SymPy, latex2sympy, pint
    {"gold": "\\boxed{x^2}", "response": "\\boxed{x \\cdot x}", "answer_type": "EX", "label": True},
    {"gold": "\\boxed{E = m c^2}", "response": "\\boxed{E = c^2 m}", "answer_type": "EQ", "label": True},
    {"gold": "\\boxed{1\\,\\mathrm{km}}", "response": "\\boxed{1000\\,\\mathrm{m}}", "answer_type": "NV", "label": True},
    {"gold": "\\boxed{\\frac{1}{2} m v^2}", "response": "\\boxed{m v^2 / 2}", "answer_type": "EX", "label": True},
    {"gold": "\\boxed{x^2}", "response": "\\boxed{x^3}", "answer_type": "EX", "label": False},
]


def test_workers_import_nothing_from_pythonpath_even_when_the_parent_started_with_it(tmp_path: Path) -> None:
    """A real parent started with ``PYTHONPATH=<src>:<hostile>``, the hostile directory planted with every
    top-level module a worker imports: no worker imports one, and ``verify-file`` decides every pair
    (recall 1.0, exit 0). (The working directory was already kept off the workers' path.)"""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    clean = subprocess.run([sys.executable, str(probe), json.dumps(PAIRS)], capture_output=True, text=True, timeout=300,
                           env=_env(PYTHONPATH=SRC, STUDYBENCH_VERIFY_WARM="0"), cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    loaded = json.loads(clean.stdout)
    assert loaded["correct"] == [p["label"] for p in PAIRS]
    planted = sorted(set(loaded["worker"]) - _bare_interpreter_modules() - {"studybench", "__main__", "__mp_main__"})
    assert {"sympy", "mpmath", "pint", "json"} <= set(planted), planted

    hostile, marks = tmp_path / "hostile", tmp_path / "marks"
    hostile.mkdir()
    marks.mkdir()
    for name in planted:
        (hostile / f"{name}.py").write_text(TRANSPARENT_TRAP.format(marks=str(marks)))
    pairs = hostile / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    proc = subprocess.Popen([sys.executable, "-m", "studybench", "verify-file", str(pairs), "-o", str(tmp_path / "out.jsonl"),
                             "--workers", "1", "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(PYTHONPATH=f"{SRC}{os.pathsep}{hostile}", STUDYBENCH_VERIFY_WARM="0"), cwd=tmp_path)
    _, err = proc.communicate(timeout=300)
    by_workers = sorted(m.name for m in marks.iterdir() if not m.name.endswith(f"-{proc.pid}"))
    assert by_workers == [], f"workers imported planted modules: {by_workers}"
    assert proc.returncode == 0, err
    assert "recall 1.0000" in " ".join(err.split()) and "0 internal errors" in err
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in out] == [p["label"] for p in PAIRS], [r["reason"] for r in out]


def _imported_by(args: list[str], cwd: Path) -> list[str]:
    """Top-level modules a ``python -X importtime ARGS`` run imports, in order."""
    res = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=300,
                         cwd=cwd, env=_env(PYTHONPATH=SRC))
    names: list[str] = []
    for line in res.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "imported package" not in line:
            top = line.rsplit("|", 1)[1].strip().partition(".")[0]
            if top not in names:
                names.append(top)
    return names


COMMANDS = {
    "studybench verify": ["-m", "studybench", "verify", "\\boxed{2}", "Final Answer: \\boxed{2}", "--type", "NV"],
    "studybench.cli version": ["-m", "studybench.cli", "version"],
    "studybench --help": ["-m", "studybench", "--help"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_python_m_studybench_imports_nothing_from_the_working_directory(tmp_path: Path, command: str) -> None:
    """Every top-level module the command's main process imports once the package runs (generated:
    ``-X importtime`` of the command, less what Python itself imports for any ``-m`` run, which no
    package can prevent: see the package docstring), plus ``secrets``, ``json`` and ``sympy``, planted in
    the working directory as modules that leave a mark: none is imported, and the command works."""
    args = COMMANDS[command]
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "emptypkg").mkdir()
    (clean / "emptypkg" / "__init__.py").write_text("")
    (clean / "emptypkg" / "__main__.py").write_text("")
    python_own = set(_imported_by(["-m", "emptypkg"], clean))
    ours = [m for m in _imported_by(args, clean) if m not in python_own and m not in sys.builtin_module_names]
    planted = sorted((set(ours) | {"secrets", "json", "sympy"}) - {"studybench"})
    assert {"secrets", "json", "typer", "rich"} <= set(planted) and len(planted) > 40, planted

    cwd, marks = tmp_path / "cwd", tmp_path / "marks"
    cwd.mkdir()
    marks.mkdir()
    for name in planted:
        (cwd / f"{name}.py").write_text(MARKING_TRAP.format(marks=str(marks)))
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=_env(PYTHONPATH=SRC))
    assert sorted(m.name.rpartition("-")[0] for m in marks.iterdir()) == []
    assert res.returncode == 0, res.stderr


def test_importing_studybench_from_another_program_leaves_its_path_alone(tmp_path: Path) -> None:
    """Only ``python -m studybench`` loses the working directory; a program that imports studybench keeps its ``sys.path``."""
    pkg = tmp_path / "otherpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import sys\nbefore = list(sys.path)\nimport studybench\nassert sys.path == before, sys.path\n")
    (pkg / "__main__.py").write_text("")
    res = subprocess.run([sys.executable, "-m", "otherpkg"], capture_output=True, text=True, cwd=tmp_path, env=_env(PYTHONPATH=SRC))
    assert res.returncode == 0, res.stderr
