"""Every ``--option`` that a message, hint or help text names exists, and one setting has one flag.

Both checks are generated: the first reads every string literal of ``src/studybench`` (error messages,
hints, help and docstrings) and walks the typer app for the options that exist; the second compares the
flags of all commands. A new command, message or option is checked without touching this file.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

import studybench
from studybench.cli import app

SRC = Path(studybench.__file__).resolve().parent
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")  # not a prefix such as "--judge-" + name

#: Flags of other programs that the sources name on purpose, with where they belong.
FOREIGN = {
    "--max-model-len": "vLLM server", "--reasoning-parser": "vLLM server", "--n-ctx": "llama.cpp server",
    "--head": "`ray start --head`", "--wrap": "pandoc", "--user": "`pip install --user`",
    "--int8": "bench/retrieval_bench.py", "--compare-dtype": "bench/audit_bench.py", "--profile": "bench/audit_bench.py",
    "--compare-backend": "bench/audit_bench.py", "--api-key": "secret patterns", "--key": "secret patterns",
    "--password": "secret patterns", "--secret": "secret patterns", "--token": "secret patterns",
}
#: Modules with a command line of their own (checked against their own parser, not the studybench CLI).
OWN_CLI = ("testing/",)


def _commands() -> Iterator[tuple[tuple[str, ...], object]]:
    root = typer.main.get_command(app)

    def walk(cmd: object, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, (*path, name))

    yield from walk(root, ())


def _flags(cmd: object, *, hidden: bool = True) -> set[str]:
    return {o for p in getattr(cmd, "params", []) if p.param_type_name == "option" and (hidden or not p.hidden)
            for o in (*p.opts, *p.secondary_opts)}


ALL_FLAGS = set().union(*(_flags(c) for _, c in _commands())) | {"--help", "--version"}


def _original(fn: object) -> object:
    """The function a command's decorators wrap (option sets drop ``__wrapped__``: typer must not see it)."""
    while True:
        inner = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()
                 if inspect.isfunction(c.cell_contents) and c.cell_contents.__name__ == getattr(fn, "__name__", None)]
        if not inner:
            return inspect.unwrap(fn)
        fn = inner[0]


def _module_commands() -> dict[str, set[str]]:
    """``{source file: flags of the commands that use it}``: a command uses its own module, the modules its
    callback imports (the CLI imports the library inside each command) and the modules those import."""
    out: dict[str, set[str]] = {}
    for _, cmd in _commands():
        fn = getattr(cmd, "callback", None)
        if fn is None or not getattr(fn, "__module__", "").startswith("studybench."):
            continue
        fn = _original(fn)
        mods = {fn.__module__}
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 and n.module.startswith("studybench.")}
        for m in list(mods):  # and the library modules those import at their top (not the CLI's shared ones)
            try:
                f = inspect.getsourcefile(importlib.import_module(m))
            except (ImportError, TypeError):
                continue
            mods |= {n.module for n in ast.parse(Path(f).read_text(encoding="utf-8")).body
                     if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("studybench.")
                     and not n.module.startswith("studybench.cli")} if f else set()
        for m in mods:
            try:
                f = inspect.getsourcefile(importlib.import_module(m))
            except (ImportError, TypeError):
                continue
            if f:
                out.setdefault(str(Path(f).resolve().relative_to(SRC)), set()).update(_flags(cmd) | {"--help"})
    return out


#: Calls whose string arguments the user reads as an error or a hint.
SAYERS = {"fail", "fail_for", "fail_write", "fail_os", "print", "echo", "secho", "warn", "deprecated", "Exit"}


def _strings(*, messages: bool = False) -> Iterator[tuple[str, int, str]]:
    """``(file, line, text)`` of every string literal with ``--`` (``messages``: only those raised or printed)."""
    for f in sorted(SRC.rglob("*.py")):
        rel = str(f.relative_to(SRC))
        if rel.startswith(OWN_CLI):
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        roots: list[ast.AST] = [tree]
        if messages:
            roots = [n for n in ast.walk(tree) if isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and (
                getattr(n.func, "id", None) or getattr(n.func, "attr", None)) in SAYERS)]
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "--" in node.value:
                    yield rel, node.lineno, node.value


def test_every_named_option_exists_on_some_command() -> None:
    """A message or help text that names ``--x`` names an option of the CLI (or of a program it names)."""
    bad = sorted(f"{rel}:{line}: {flag}" for rel, line, text in _strings() for flag in FLAG.findall(text)
                 if flag not in ALL_FLAGS and flag not in FOREIGN)
    assert not bad, "options that no command has:\n" + "\n".join(bad)


def test_a_commands_own_messages_name_its_own_options() -> None:
    """In a module that commands use, an error or a hint (raised or printed) naming ``--x`` without naming
    another command (``studybench ...``, a backquoted command) names an option of one of those commands (``build retry`` once told the user
    to "use another --out", an option only other commands have)."""
    used = _module_commands()
    assert any(rel.endswith("build_guide.py") for rel in used)  # the walk reaches the commands' modules
    bad = []
    for rel, line, text in _strings(messages=True):
        if rel not in used or "`" in text or "studybench " in text:
            continue
        bad += [f"{rel}:{line}: {flag}" for flag in FLAG.findall(text)
                if flag not in used[rel] and flag not in FOREIGN and flag in ALL_FLAGS]
    assert not bad, "options that the commands using the module do not have:\n" + "\n".join(sorted(set(bad)))


def test_a_command_named_for_a_stage_spells_its_options_as_the_others_do() -> None:
    """``verify --timeout`` was ``--verify-timeout`` everywhere else: a command whose name holds a word W has no
    visible ``--x`` when another command spells the same setting ``--W-x``."""
    visible = [(path, f) for path, cmd in _commands() for f in _flags(cmd, hidden=False)]
    everywhere = {f for _, f in visible}
    bad = [f"{' '.join(path)} {f} (elsewhere --{w}-{f[2:]})" for path, f in visible if f.startswith("--")
           for w in {w for part in path for w in part.split("-")} if f"--{w}-{f[2:]}" in everywhere]
    assert not bad, "one setting, two names:\n" + "\n".join(bad)


def test_one_flag_per_parameter_name_across_commands() -> None:
    """The same parameter (``max_retries``, ``request_timeout``, ...) has the same primary flag on every command."""
    seen: dict[str, set[str]] = {}
    for _, cmd in _commands():
        for p in getattr(cmd, "params", []):
            if p.param_type_name == "option" and not p.hidden:
                seen.setdefault(p.name or "", set()).add(next((o for o in p.opts if o.startswith("--")), p.opts[0]))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


@pytest.mark.parametrize(("command", "old", "new"), [
    ("verify", "--timeout", "--verify-timeout"),
    ("verify-file", "--timeout", "--verify-timeout"),
    ("verify-file", "--workers", "--verify-workers"),
])
def test_old_names_stay_as_hidden_aliases(command: str, old: str, new: str) -> None:
    """A renamed flag keeps its old name working, out of the help."""
    cmd = dict(_commands())[(command,)]
    params = {o: p for p in cmd.params for o in p.opts}
    assert params[old].hidden and not params[new].hidden
    assert params[old].name != params[new].name


def test_the_old_verify_flags_still_work(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    old = CliRunner().invoke(app, ["verify", "\\boxed{2}", "\\boxed{2}", "--type", "NV", "--timeout", "30"])
    new = CliRunner().invoke(app, ["verify", "\\boxed{2}", "\\boxed{2}", "--type", "NV", "--verify-timeout", "30"])
    assert old.exit_code == new.exit_code == 0
    bad = CliRunner().invoke(app, ["verify", "\\boxed{2}", "\\boxed{2}", "--type", "NV", "--timeout", "0"])
    assert bad.exit_code == 2 and "--verify-timeout" in bad.output


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
            out |= {f"{n.module}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return out


def _loads_torch(tree: ast.AST) -> bool:
    """Whether a module imports torch or sentence-transformers (statically, or by name: ``require_extra``)."""
    return any(m.split(".")[0] in ("torch", "sentence_transformers") for m in _imports(tree)) or any(
        isinstance(n, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "sentence_transformers" for a in n.args)
        for n in ast.walk(tree))


def _torch_commands() -> dict[tuple[str, ...], object]:
    """The commands that can run torch: their callback (or its module) imports a module that loads torch or
    sentence-transformers, or a module importing one (two steps: deeper, a helper module is imported for
    something else, e.g. ``build verify`` for the retrieval's text normalisation)."""
    trees: dict[str, ast.AST] = {}
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC.parent).with_suffix("")
        trees[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = ast.parse(f.read_text(encoding="utf-8"))
    torch_mods = {m for m, t in trees.items() if _loads_torch(t)}

    out = {}
    for path, cmd in _commands():
        fn = getattr(cmd, "callback", None)
        if fn is None or not fn.__module__.startswith("studybench.") or getattr(cmd, "commands", None) is not None:
            continue
        fn = _original(fn)
        top = ast.Module(body=[n for n in trees[fn.__module__].body if isinstance(n, ast.Import | ast.ImportFrom)],
                         type_ignores=[])  # the module's own imports, not the other commands'
        first = {m for m in _imports(ast.parse(textwrap.dedent(inspect.getsource(fn)))) | _imports(top)
                 if m in trees and not m.startswith("studybench.cli")}
        second = set().union(*(_imports(trees[m]) for m in first)) if first else set()
        if (first | second) & torch_mods:
            out[path] = cmd
    return out


def test_every_command_that_runs_torch_takes_torch_threads() -> None:
    """``--torch-threads`` (one name, the README's and the bench scripts') on every command that embeds."""
    found = _torch_commands()
    assert {("build", "retrieve"), ("build", "decompose"), ("audit", "contamination")} <= set(found)
    missing = [" ".join(p) for p, cmd in found.items() if "--torch-threads" not in _flags(cmd, hidden=False)]
    assert not missing, f"no --torch-threads: {missing}"


_EMBEDDING_COMMANDS = [
    ["build", "retrieve", "--work", "{tmp}/work"],
    ["build", "decompose", "--work", "{tmp}/work", "--teacher", "t", "--split", "{tmp}/missing.json"],
    ["audit", "contamination", "--train", "{tmp}/missing.jsonl", "--eval", "{tmp}/missing.jsonl", "--out", "{tmp}/out"],
]
"""The commands that run an embedding model, with inputs that are missing (their error would come first)."""


@pytest.mark.parametrize("args", _EMBEDDING_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_torch_threads_is_applied_before_the_command_reads_its_inputs(args: list[str], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from typer.testing import CliRunner

    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    res = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args] + ["--torch-threads", "3"])
    assert res.exit_code != 0  # the inputs are missing, but the setting came first
    assert calls == [3]
    calls.clear()
    CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert calls == []  # without the option torch keeps its own choice
    res = CliRunner().invoke(app, [a.format(tmp=tmp_path) for a in args] + ["--torch-threads", "0"])
    assert res.exit_code == 2 and calls == []


def test_every_command_that_runs_torch_takes_embedding_backend() -> None:
    """``--embedding-backend torch|onnx`` (default torch) on every command that embeds, found as
    ``--torch-threads``'s commands are."""
    found = _torch_commands()
    assert {("build", "retrieve"), ("build", "decompose"), ("audit", "contamination")} <= set(found)
    missing = [" ".join(p) for p, cmd in found.items() if "--embedding-backend" not in _flags(cmd, hidden=False)]
    assert not missing, f"no --embedding-backend: {missing}"
    defaults = {" ".join(p): next(q.default for q in cmd.params if q.name == "embedding_backend") for p, cmd in found.items()}
    assert set(defaults.values()) == {"torch"}, defaults  # onnx is never chosen silently


@pytest.mark.parametrize("args", _EMBEDDING_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_embedding_backend_is_checked_before_the_command_reads_its_inputs(args: list[str], tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown backend is a usage error; ``onnx`` without its extra is one line naming ``studybench[onnx]``,
    exit 2, before any input is read (the inputs here are missing: their error would come first otherwise)."""
    import importlib.util

    from typer.testing import CliRunner

    argv = [a.format(tmp=tmp_path) for a in args]
    res = CliRunner().invoke(app, [*argv, "--embedding-backend", "tensorflow"])
    assert res.exit_code == 2 and "--embedding-backend" in res.output
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a, **k: None if n == "onnxruntime" else real(n, *a, **k))
    res = CliRunner().invoke(app, [*argv, "--embedding-backend", "onnx"])
    assert res.exit_code == 2 and "studybench[onnx]" in res.output and "missing" not in res.output, res.output


def test_every_spec_field_an_error_can_name_maps_to_an_option_of_eval() -> None:
    """``fail_for`` turns a library error's field into a flag (``flag_for``): every field of the evaluation's
    spec (nested parts included) maps to an option ``eval`` has (``labels`` became ``--labels``, ``--label``'s
    plural; ``dataset`` became ``--dataset``)."""
    from pydantic import BaseModel

    from studybench.cli.common import flag_for
    from studybench.evaluate import EvalSpec

    def leaves(model: type[BaseModel]) -> Iterator[str]:
        for name, f in model.model_fields.items():
            sub = f.annotation
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                yield from leaves(sub)
            else:
                yield name

    eval_flags = _flags(dict(_commands())[("eval",)])
    bad = [f"{name} -> {flag_for(name)}" for name in leaves(EvalSpec) if flag_for(name) not in eval_flags]
    assert not bad, bad
