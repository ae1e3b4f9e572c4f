"""Commands are registered explicitly (issue 26 item 3): ``studybench build`` lists its stages from one
table in pipeline order, and no CLI module registers a command by being imported for its side effects."""

from __future__ import annotations

import ast

import typer
from _support import REPO

from studybench.cli import app
from studybench.cli.build import BUILD_COMMANDS, build_app

CLI = REPO / "src" / "studybench" / "cli"


def test_build_lists_its_stages_in_the_order_of_the_table() -> None:
    group = typer.main.get_command(app).commands["build"]
    assert list(group.commands) == [name for name, _ in BUILD_COMMANDS]
    assert list(group.commands) == ["fragments", "retrieve", "decompose", "verify", "guide", "retry", "capability"]
    for name, fn in BUILD_COMMANDS:
        assert group.commands[name].callback is not None
        assert (fn.__doc__ or "").split()[:3] == (group.commands[name].help or "").split()[:3], name


def test_no_cli_module_registers_on_another_modules_app() -> None:
    """A module that decorates an app it imported (``@build_app.command``) registers only when something
    imports it for that side effect; every registration names its own module's app or happens where the
    app is made."""
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("studybench.cli") for a in n.names}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                        assert not (target.attr in ("command", "callback") and target.value.id in imported), (
                            f"{path.name}: {node.name} registers on the imported {target.value.id}")


def test_side_effect_imports_are_gone() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in CLI.glob("*.py"))
    assert "noqa: E402,F401" not in text
    assert build_app.registered_commands, "build_app has no commands"
