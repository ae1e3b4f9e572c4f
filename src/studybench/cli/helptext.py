"""``--help`` pages that read well in an 80-column terminal.

Typer's Rich layout puts every option in a six-column table (long name, short name, negative name,
type, help), so at 80 columns the help text is squeezed into a narrow last column, types print as
``<int>`` / ``<bool>`` and required arguments show as ``{run_dir}`` in the usage line. The command
classes here keep Typer's parsing and its option panels (``rich_help_panel``), but lay each panel out
in two columns: the option's flags with a metavar (``--judge-request-timeout SECONDS``), and its help.
A flag list too long for the first column gets a line of its own, with the help below it (as in
click's and argparse's plain help). Paragraphs of docstrings and help strings are re-flowed to the
terminal width; bool flags show no metavar; arguments are spelled ``RUN_DIR`` in usage lines.

:func:`use_readable_help` installs the classes on a :class:`typer.Typer` application and all its
sub-applications, so command modules need nothing but ordinary ``typer.Option`` declarations.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args

import typer
from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = [
    "MAX_HELP_WIDTH",
    "ReadableCommand",
    "ReadableGroup",
    "default_metavar",
    "reflow",
    "render_help",
    "use_readable_help",
]

MAX_HELP_WIDTH = 100
"""Help pages are at most this wide on wider terminals (long lines are hard to read); a
``max_content_width`` context setting overrides it."""

_MIN_HELP_COLUMN = 38
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def reflow(text: str) -> str:
    """A docstring or help string as paragraphs joined by one blank line, each on one line.

    Single line breaks (kept from the source layout) become spaces; a paragraph that starts with
    click's ``\\b`` marker keeps its line breaks; anything after a ``\\f`` line is dropped.

    Args:
        text: the raw help text.

    Returns:
        The re-flowed text.
    """
    text = inspect.cleandoc(text).partition("\f")[0]
    out = []
    for para in re.split(r"\n\s*\n", text):
        if para.startswith("\b"):
            out.append(para.lstrip("\b\n").rstrip())
        elif para.strip():
            out.append(" ".join(para.split()))
    return "\n\n".join(out)


def _element_type(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return _element_type(args[0]) if args else annotation


def default_metavar(param: Any) -> str | None:
    """The metavar an option or argument shows when it declares none.

    Flags (bool options, counters) take no value and show none. Otherwise: ``N`` for integers,
    ``SECONDS`` for timeouts, ``NUM`` for other floats, ``URL`` / ``VAR`` for ``..._url`` /
    ``..._env`` options, ``DIR`` for directories (``..._dir``, ``..._cache``), ``PATH`` for other
    paths, the flag's last word for other strings (``--judge-model MODEL``, ``--split SPLIT``); an
    argument shows its name in capitals (``RUN_DIR``).

    Args:
        param: a :class:`typer.core.TyperOption` or :class:`typer.core.TyperArgument`.

    Returns:
        The metavar, or ``None`` for a flag.
    """
    name = (param.name or "").lower().rstrip("_")
    if isinstance(param, TyperArgument):
        return name.upper()
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and desc.is_choice and desc.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    tp = _element_type(getattr(desc, "annotation", str))
    if tp is bool:
        return None
    if tp is int:
        return "N"
    if tp is float:
        return "SECONDS" if "timeout" in name else "NUM"
    if name.endswith("url"):
        return "URL"
    if name.endswith("_env"):
        return "VAR"
    if isinstance(tp, type) and issubclass(tp, Path):
        return "DIR" if name.endswith(("dir", "cache")) else "PATH"
    longest = max(param.opts, key=len, default="").lstrip("-")
    word = re.split(r"[-_]", longest)[-1].upper()
    return word if word.isidentifier() and len(word) > 1 else "TEXT"


def _set_metavars(params: Iterable[Any]) -> None:
    for p in params:
        if isinstance(p, (TyperArgument, TyperOption)) and p.metavar is None:
            mv = default_metavar(p)
            if mv is not None:
                p.metavar = mv
            elif isinstance(p, TyperOption):
                p.metavar = ""  # typer's own layout would print "<bool>"


# --------------------------------------------------------------------------- rendering


def _console(ctx: typer.Context) -> Console:
    probe = Console()
    limit = ctx.max_content_width or MAX_HELP_WIDTH
    width = min(ctx.terminal_width or probe.width, limit)
    return Console(width=max(width, 40), highlight=False, soft_wrap=False)


def _flags_text(names: str) -> Text:
    text = Text(names, style="yellow")
    for m in _FLAG.finditer(names):
        text.stylize("bold cyan", m.start(1), m.end(1))
    return text


def _help_text(help_: str, width: int, console: Console) -> Text:
    """The help of one option; its ``[default: ...]`` stays in one piece, on the last line when it fits."""
    body, sep, extra = help_.rpartition("  [")
    if not sep or not extra.endswith("]"):
        body, extra = help_, ""
    text = Text(reflow(body).replace("\n\n", "\n"))
    if extra:
        extra = "[" + extra
        last = text.wrap(console, width)[-1].cell_len if body else 0
        joint = "" if not body else " " if last + 1 + len(extra) <= width else "\n"
        text.append(joint + extra, style="dim")
    return text


def _param_rows(cmd: Any, ctx: typer.Context) -> dict[str, list[tuple[str, str]]]:
    """``{panel title: [(flags, help)]}``, arguments' panels first, in declaration order."""
    args: dict[str, list[tuple[str, str]]] = {"Arguments": []}
    opts: dict[str, list[tuple[str, str]]] = {"Options": []}
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        _set_metavars([p])
        record = p.get_help_record(ctx)
        if record is None:
            continue
        names, help_ = record
        if isinstance(p, TyperArgument):
            names = p.metavar or p.name.upper()
            extra = "required" if p.required else None if p.default is None else f"default: {p.default}"
            help_ = (p.help or "") + (f"  [{extra}]" if extra else "")
        panel = getattr(p, "rich_help_panel", None)
        target = args if isinstance(p, TyperArgument) else opts
        target.setdefault(panel or ("Arguments" if target is args else "Options"), []).append((names, help_))
    return {k: v for k, v in [*args.items(), *opts.items()] if v}


def _two_columns(rows: list[tuple[Text, Text]], first: int) -> Group:
    """Rows of (flags, help) in two aligned columns; flags wider than ``first`` get a line of their own."""

    def grid() -> Table:
        table = Table.grid(padding=(0, 2), expand=True)
        table.add_column(width=first, no_wrap=True)
        table.add_column(ratio=1, overflow="fold")
        return table

    parts: list[Any] = [grid()]
    for left, right in rows:
        if left.cell_len > first:
            left.overflow = "fold"
            parts += [left, grid()]
            parts[-1].add_row("", right)
        else:
            parts[-1].add_row(left, right)
    return Group(*[p for p in parts if not isinstance(p, Table) or p.row_count])


def _panel(title: str, body: Any) -> Panel:
    return Panel(body, title=title, title_align="left", border_style="dim", box=box.ROUNDED, padding=(0, 1))


def _short_help(cmd: Any) -> str:
    if cmd.short_help:
        return reflow(cmd.short_help)
    return reflow(cmd.help or "").split("\n\n")[0]


def _usage(cmd: Any, ctx: typer.Context) -> str:
    pieces = [cmd.options_metavar] if cmd.options_metavar else []
    for p in cmd.get_params(ctx):
        if isinstance(p, TyperArgument):
            name = p.metavar or p.name.upper()
            name = name if p.required else f"[{name}]"
            pieces.append(name + ("..." if p.nargs != 1 else ""))
    if isinstance(cmd, TyperGroup):
        pieces.append(cmd.subcommand_metavar)
    return " ".join(pieces)


def render_help(cmd: Any, ctx: typer.Context) -> None:
    """Print a command's help page to stdout: usage, description, option panels, subcommands.

    Args:
        cmd: the command or group.
        ctx: its context (terminal width, ``max_content_width``, the command path).
    """
    console = _console(ctx)
    out: list[Any] = [Padding(Text.assemble(("Usage: ", "yellow"), (f"{ctx.command_path} {_usage(cmd, ctx)}", "bold")), (1, 1, 1, 1))]
    if cmd.help:
        paras = reflow(cmd.help).split("\n\n")
        body = Text(paras[0])
        if len(paras) > 1:
            body.append("\n\n" + "\n\n".join(paras[1:]), style="dim")
        if cmd.deprecated:
            body = Text.assemble(("(deprecated) ", "red"), body)
        out.append(Padding(body, (0, 1, 1, 1)))
    panels = _param_rows(cmd, ctx)
    inner = console.width - 4  # panel border and padding
    widest = max((len(n) for rows in panels.values() for n, _ in rows), default=0)
    first = min(widest, max(inner - 2 - _MIN_HELP_COLUMN, 16))
    help_width = inner - 2 - first
    for title, rows in panels.items():
        cells = [(_flags_text(n), _help_text(h, help_width, console)) for n, h in rows]
        out.append(_panel(title, _two_columns(cells, first)))
    if isinstance(cmd, TyperGroup):
        subs = [(n, c) for n in cmd.list_commands(ctx) if (c := cmd.get_command(ctx, n)) is not None and not c.hidden]
        if subs:
            width = min(max(len(n) for n, _ in subs), max(inner - 2 - _MIN_HELP_COLUMN, 12))
            rows = [(Text(n, style="bold cyan"), Text(_short_help(c))) for n, c in subs]
            out.append(_panel("Commands", _two_columns(rows, width)))
    if cmd.epilog:
        out.append(Padding(Text(reflow(cmd.epilog)), 1))
    console.print(Group(*out))


class _ReadableHelp:
    """What :class:`ReadableCommand` and :class:`ReadableGroup` add to Typer's classes."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _set_metavars(self.params)

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        """Usage pieces with arguments spelled ``RUN_DIR`` / ``[RUN_DIR]`` (Typer writes ``{run_dir}``)."""
        return _usage(self, ctx).split()  # type: ignore[arg-type]

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        """Print the help page (see :func:`render_help`)."""
        render_help(self, ctx)  # type: ignore[arg-type]


class ReadableCommand(_ReadableHelp, TyperCommand):
    """A Typer command whose ``--help`` is laid out by :func:`render_help`."""


class ReadableGroup(_ReadableHelp, TyperGroup):
    """A Typer command group whose ``--help`` is laid out by :func:`render_help`."""


def _replaceable(cls: Any, default: type) -> bool:
    """Whether ``cls`` is Typer's default (or its "not given" placeholder) rather than a class of one's own."""
    return cls is None or cls is default or not isinstance(cls, type)


def use_readable_help(app: typer.Typer) -> typer.Typer:
    """Make every command and group of ``app`` (and of the applications added to it) use
    :class:`ReadableCommand` / :class:`ReadableGroup`, unless it names a class of its own.

    Call it after all commands and sub-applications are registered.

    Args:
        app: the application.

    Returns:
        ``app``.
    """
    if _replaceable(app.info.cls, TyperGroup):
        app.info.cls = ReadableGroup
    for info in app.registered_commands:
        if _replaceable(info.cls, TyperCommand):
            info.cls = ReadableCommand
    for group in app.registered_groups:
        if _replaceable(group.cls, TyperGroup):
            group.cls = ReadableGroup
        if group.typer_instance is not None:
            use_readable_help(group.typer_instance)
    return app
