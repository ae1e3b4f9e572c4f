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
    "--int8": "bench/retrieval_bench.py", "--api-key": "secret patterns", "--key": "secret patterns",
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


def _module_commands() -> dict[str, set[str]]:
    """``{source file: flags of the commands that use it}``: a command uses its own module and the modules its
    callback imports (the CLI imports the library inside each command)."""
    out: dict[str, set[str]] = {}
    for _, cmd in _commands():
        fn = getattr(cmd, "callback", None)
        if fn is None or not getattr(fn, "__module__", "").startswith("studybench."):
            continue
        fn = inspect.unwrap(fn)
        mods = {fn.__module__}
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                 and n.module.startswith("studybench.")}
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
