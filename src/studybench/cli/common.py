"""What every command shares: consoles, errors, progress bars, and option sets defined once.

An :class:`OptionSet` is a group of options several commands take (the LLM judge's, the rule
verifier's). Decorating a command with it appends the options to the command's signature and hands
the command one dict of their values, so each option is declared in exactly one place.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, get_type_hints

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from studybench.cli.progress import LINE_EVERY_S, LineProgress
from studybench.escaping import plural, printable, short_name

__all__ = [
    "JUDGE_OPTIONS",
    "SELECTION_OPTIONS",
    "VERIFY_OPTIONS",
    "OptionSet",
    "SafeConsole",
    "console",
    "deprecated",
    "fail",
    "fail_for",
    "fail_os",
    "fail_write",
    "flag_for",
    "interruptible",
    "judge_overrides",
    "judge_spec",
    "out_console",
    "plural",
    "progress_bars",
    "selection_spec",
    "verify_settings",
]

class SafeConsole(Console):
    """A Rich console that never sends a control character it was given in text to the terminal.

    Every string it renders (messages, table cells, Markdown) goes through
    :func:`studybench.escaping.printable` first, keeping line feeds and tabs: a NUL byte or an escape
    sequence in a source id, a model name or a file name is shown as ``\\x00`` / ``\\x1b``. This is
    the one place every name the commands print passes through.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            # Rich pins COLUMNS as it was at construction (import time here); read it at each render
            # instead, so a caller that sets COLUMNS later (a test runner, an embedding program) is obeyed.
            self._width = None
        if kwargs.get("height") is None:
            self._height = None

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """:meth:`rich.console.Console.render_str` of the text with its control characters escaped."""
        return super().render_str(printable(text, newlines=True), **kwargs)


console = SafeConsole(stderr=True, soft_wrap=True)
"""Messages, warnings, progress (stderr). A message is never broken at the terminal width (the terminal
wraps it), so a path or a command in it stays whole for copying and for grep."""
out_console = SafeConsole(soft_wrap=True)
"""Results (stdout): tables at the terminal width; lines of text never broken (as for :data:`console`)."""


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: msg`` on one line (control characters and line breaks escaped) and exit with ``code``
    (2: a usage or input error; see docs/exit-statuses.md)."""
    console.print(f"[bold red]error:[/bold red] {escape(printable(msg))}", soft_wrap=True)
    raise typer.Exit(code)


_USAGE_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EINVAL, errno.ELOOP})
"""``OSError`` numbers that mean the name given is unusable (a usage or input error: exit 2); any other
error of a file operation is one the command could not finish (exit 1)."""


def fail_os(e: OSError, fallback: Path | str | None = None) -> NoReturn:
    """Fail with one line for an ``OSError`` of a file operation (see docs/exit-statuses.md).

    A full disk (or quota) is :func:`fail_write` (exit 1, saying what is kept); an unusable name (too
    long, missing, not a directory, a directory where a file belongs) is a usage or input error (exit 2);
    any other error (no permission, an I/O error) means the command could not finish (exit 1). The file's
    name is shortened and its control characters escaped.

    Args:
        e: the error.
        fallback: the name to show when the error names no file.
    """
    if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        fail_write(e, fallback if fallback is not None else "a file")
    usage = e.errno in _USAGE_ERRNOS or isinstance(e, (FileNotFoundError, NotADirectoryError, IsADirectoryError))
    if e.errno is None or not e.strerror:  # raised by our code with a message
        msg = str(e)
    else:
        where = e.filename if e.filename is not None else fallback
        msg = f"{short_name(where)}: {e.strerror}" if where is not None else e.strerror
    fail(msg, 2 if usage else 1)


def deprecated(old: str, new: str) -> None:
    """Warn once that flag ``old`` is deprecated in favour of ``new``."""
    console.print(f"[yellow]warning:[/yellow] {old} is deprecated; use {new}", soft_wrap=True)


_FLAGS = {"k": "-k", "parent_slice": "--slice", "out": "--out", "split": "--split", "judge": "--judge-model",
          "parent_ids": "--parent", "exclude_ids": "--exclude", "dataset": "--split", "labels": "--label"}


def flag_for(field: str | None) -> str | None:
    """The command-line flag of a spec field (``"verify_timeout"`` -> ``"--verify-timeout"``,
    ``"judge.concurrency"`` -> ``"--judge-concurrency"``)."""
    if not field:
        return None
    if field.startswith("judge."):
        sub = field.split(".", 1)[1]
        return {"prompt": "--judge-prompt", "cache_dir": "--judge-cache", "use_cache": "--no-judge-cache"}.get(
            sub, "--judge-" + sub.replace("_", "-"))
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def fail_for(e: Exception, field: str | None) -> NoReturn:
    """Fail with a library error's message, its leading field name (``"temperature: ..."``,
    ``"judge concurrency: ..."``) replaced by the command-line flag."""
    msg, flag = str(e), flag_for(field)
    if field and flag:
        for head in (field, field.replace(".", " "), field.split(".")[-1]):
            if msg.startswith(head + ": "):
                msg = f"{flag}: {msg[len(head) + 2:]}"
                break
    fail(msg)


def fail_write(e: OSError, fallback: Path | str, *, resumable: bool = True) -> NoReturn:
    """Fail (exit 1) because a file could not be written: name the file, and with a full disk say
    that what was saved is kept and that the same command resumes once space is freed. A name too long
    to use is a usage error instead (exit 2)."""
    where = e.filename if e.filename is not None else fallback
    msg = f"cannot write {short_name(where)}: {e.strerror or e}"
    if e.errno == errno.ENAMETOOLONG:  # an unusable name (over 255 characters): a usage error
        fail(msg, 2)
    if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        msg += "; everything saved before is kept"
        if resumable:
            msg += ": free some space, then re-run the same command and it resumes from what is saved"
    fail(msg, 1)


@contextmanager
def interruptible() -> Iterator[list[int]]:
    """Turn SIGTERM into the same graceful stop as Ctrl-C (``KeyboardInterrupt``) for the block.

    Yields:
        A list that holds ``signal.SIGTERM`` once one was received (for the exit status 143 vs 130).
    """
    got: list[int] = []

    def on_term(signum: int, frame: Any) -> None:
        got.append(signum)
        handler = signal.getsignal(signal.SIGINT)  # asyncio's own handler while an event loop runs
        if callable(handler) and handler is not on_term:
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield got
        return
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, old)


# --------------------------------------------------------------------------- progress


class _RateColumn(ProgressColumn):
    """Items (turns) per second since the task started."""

    def __init__(self, unit: str = "turns") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.1f} {self.unit}/s" if self.unit else f"{rate:,.1f}/s", style="progress.data.speed")


@contextmanager
def _progress_lines(unit: str) -> Iterator[Callable[[str, int, int | None], None]]:
    """:class:`~studybench.cli.progress.LineProgress` on stderr, with a heartbeat thread."""
    lines = LineProgress(lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True), unit=unit)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(min(5.0, LINE_EVERY_S)):
            lines.tick()

    thread = threading.Thread(target=beat, name="studybench-progress", daemon=True)
    thread.start()
    try:
        yield lines
    finally:
        stop.set()
        thread.join(5)
        lines.close()


@contextmanager
def progress_bars(unit: str = "turns") -> Iterator[Callable[[str, int, int | None], None]]:
    """A :data:`studybench.evaluate.ProgressFn` showing each phase's progress.

    On a terminal (stderr), one Rich bar per phase; otherwise (a log file, a pipe) plain lines
    (:class:`~studybench.cli.progress.LineProgress`: every tenth of a phase and at least every 30 s).
    ``STUDYBENCH_PROGRESS``: ``bars`` (or ``1``) always draws bars, ``lines`` always prints lines,
    ``0`` shows none.

    Args:
        unit: what the phases count (``"turns"``; ``""``: nothing named).
    """
    mode = os.environ.get("STUDYBENCH_PROGRESS", "").strip().lower()
    if mode in ("0", "off", "none"):
        yield lambda phase, advance, total: None
        return
    if mode == "lines" or (mode not in ("1", "bars") and not console.is_terminal):
        with _progress_lines(unit) as lines:
            yield lines
        return
    prog = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    tasks: dict[str, Any] = {}

    def update(phase: str, advance: int, total: int | None) -> None:
        if phase not in tasks:
            tasks[phase] = prog.add_task(phase, total=total)
        elif total is not None:
            prog.update(tasks[phase], total=total)
        if advance:
            prog.advance(tasks[phase], advance)

    with prog:
        yield update


# --------------------------------------------------------------------------- option sets


class OptionSet:
    """Options shared by several commands, declared once.

    Args:
        name: the keyword under which the decorated command receives ``{option: value}``.
        options: ``{parameter name: (Annotated type with a typer.Option, default)}``.
    """

    def __init__(self, name: str, options: dict[str, tuple[Any, Any]]) -> None:
        self.name = name
        self.options = options

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = get_type_hints(fn, include_extras=True)
        params = [p.replace(annotation=hints.get(p.name, p.annotation))
                  for p in inspect.signature(fn).parameters.values() if p.name != self.name]
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=t, default=d)
                 for n, (t, d) in self.options.items()]
        names = list(self.options)

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            group = {n: kwargs.pop(n) for n in names}
            return fn(*args, **kwargs, **{self.name: group})

        command.__signature__ = inspect.Signature([*params, *extra])  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in [*params, *extra]}
        del command.__wrapped__  # typer must read the new signature, not the wrapped one
        return command

    @staticmethod
    def ordered(names: Sequence[str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator that lists a command's options in the order ``names`` gives (its ``--help`` order).

        Apply it above the option sets. Options not named keep their order after the named ones.
        Every option becomes keyword-only (typer passes them by name).

        Args:
            names: parameter names, in the order ``--help`` lists them.
        """
        rank = {n: i for i, n in enumerate(names)}

        def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(command)
            params = sorted(sig.parameters.values(), key=lambda p: rank.get(p.name, len(rank)))
            command.__signature__ = sig.replace(  # type: ignore[attr-defined]
                parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params])
            return command

        return decorate


_J = "LLM judge"
JUDGE_OPTIONS = OptionSet("judge_options", {
    "judge_model": (Annotated[str | None, typer.Option("--judge-model", rich_help_panel=_J, help="LLM judge model at an OpenAI-compatible endpoint; rule rejections go to it (leaderboard mode rule+llm).")], None),
    "judge_base_url": (Annotated[str | None, typer.Option("--judge-base-url", rich_help_panel=_J, help="Judge endpoint, e.g. http://127.0.0.1:8001/v1 (default $STUDYBENCH_JUDGE_BASE_URL).")], None),
    "judge_prompt": (Annotated[str | None, typer.Option("--judge-prompt", metavar="NAME|FILE", rich_help_panel=_J, help="Judge prompt: a shipped template, default (ours: ## Justification, then ## Verdict) or paper (the paper's reply format: ## Equivalence Judgement, then ## Justification), or a template file with all of {problem} {reference_solution} {reference_answers} {student_solution} {student_answers} (a file named like a template: ./NAME). Default: default.")], None),
    "judge_api_key_env": (Annotated[str, typer.Option("--judge-api-key-env", rich_help_panel=_J, help="Environment variable holding the judge's API key (never stored).")], "OPENAI_API_KEY"),
    "judge_concurrency": (Annotated[int, typer.Option("--judge-concurrency", rich_help_panel=_J, help="Judge requests in flight.")], 16),
    "judge_request_timeout": (Annotated[float, typer.Option("--judge-request-timeout", rich_help_panel=_J, help="Seconds per judge HTTP request.")], 300.0),
    "judge_max_retries": (Annotated[int, typer.Option("--judge-max-retries", rich_help_panel=_J, help="Retries per judge request on 429/5xx/timeouts.")], 6),
    "judge_parse_retries": (Annotated[int, typer.Option("--judge-parse-retries", rich_help_panel=_J, help="Re-asks after a malformed judge reply; still malformed -> unjudgeable.")], 2),
    "judge_max_tokens": (Annotated[int | None, typer.Option("--judge-max-tokens", rich_help_panel=_J, help="Token budget per judge reply (default: the server's).")], None),
    "judge_cache": (Annotated[Path | None, typer.Option("--judge-cache", rich_help_panel=_J, help="Verdict cache directory (default $STUDYBENCH_JUDGE_CACHE, then the user cache).")], None),
    "no_judge_cache": (Annotated[bool, typer.Option("--no-judge-cache", rich_help_panel=_J, help="Neither read nor write the verdict cache.")], False),
})
"""The LLM judge's options (``studybench eval`` and ``studybench judge``)."""


def judge_spec(opts: dict[str, Any], *, model: str | None = None) -> Any:
    """The :class:`studybench.llm_judge.spec.LLMJudgeSpec` of :data:`JUDGE_OPTIONS` values (``None``
    without ``--judge-model``); fails with the flag at fault."""
    from studybench.llm_judge import LLMJudgeSpec, LLMJudgeSpecError

    name = model or opts["judge_model"]
    if name is None:
        return None
    from studybench.secrets import env_name_problem

    problem = env_name_problem(opts["judge_api_key_env"])
    if problem is not None:
        fail(f"--judge-api-key-env: {problem}")
    if not os.environ.get(opts["judge_api_key_env"]):
        console.print(f"[dim]note: ${opts['judge_api_key_env']} is not set; the judge gets the placeholder key EMPTY "
                      "(what `vllm serve` accepts)[/dim]")
    try:
        return LLMJudgeSpec.create(**judge_overrides(opts), model=name)
    except LLMJudgeSpecError as e:
        fail_for(e, f"judge.{e.field}")


def judge_overrides(opts: dict[str, Any]) -> dict[str, Any]:
    """The :data:`JUDGE_OPTIONS` values as :class:`~studybench.llm_judge.spec.LLMJudgeSpec` fields (but ``model``)."""
    return {
        "base_url": opts["judge_base_url"], "prompt": opts["judge_prompt"], "api_key_env": opts["judge_api_key_env"],
        "concurrency": opts["judge_concurrency"], "request_timeout": opts["judge_request_timeout"],
        "max_retries": opts["judge_max_retries"], "parse_retries": opts["judge_parse_retries"],
        "max_tokens": opts["judge_max_tokens"], "cache_dir": opts["judge_cache"], "use_cache": not opts["no_judge_cache"],
    }


_V = "Rule verifier"
VERIFY_OPTIONS = OptionSet("verify_options", {
    "verify_timeout": (Annotated[float | None, typer.Option("--verify-timeout", rich_help_panel=_V, help="Hard wall-clock seconds per symbolic verification (default 5; `judge`: the run's own).")], None),
    "verify_workers": (Annotated[int | None, typer.Option("--verify-workers", rich_help_panel=_V, help="Rule verifier worker processes (default: CPU count, at most 8).")], None),
    "judge_timeout": (Annotated[float | None, typer.Option("--judge-timeout", hidden=True, help="Deprecated: --verify-timeout.")], None),
    "judge_workers": (Annotated[int | None, typer.Option("--judge-workers", hidden=True, help="Deprecated: --verify-workers.")], None),
})
"""The rule verifier's options (``--judge-timeout`` / ``--judge-workers`` still work, with a deprecation warning)."""


def verify_settings(opts: dict[str, Any]) -> tuple[float | None, int | None]:
    """(timeout, workers) from :data:`VERIFY_OPTIONS` values, honouring the deprecated names.

    ``None`` means "not given". Giving a setting under both its new and its deprecated name is an error.
    """
    out: list[Any] = []
    for new, old in (("verify_timeout", "judge_timeout"), ("verify_workers", "judge_workers")):
        value = opts[new]
        if opts[old] is not None:
            flag_new, flag_old = "--" + new.replace("_", "-"), "--" + old.replace("_", "-")
            if value is not None:
                fail(f"{flag_old} is the deprecated name of {flag_new}; give only {flag_new}")
            deprecated(flag_old, flag_new)
            value = opts[old]
        out.append(value)
    return out[0], out[1]


_S = "Selection"
SELECTION_OPTIONS = OptionSet("selection_options", {
    "parent": (Annotated[list[str] | None, typer.Option("--parent", metavar="ID", rich_help_panel=_S, help="Only this parent, by its id as reports write it: source/year/source_problem_id, e.g. IPhO/1972/Q3 (repeatable).")], None),
    "parents_file": (Annotated[Path | None, typer.Option("--parents", metavar="FILE", rich_help_panel=_S, help="Only the parents listed in FILE: one id per line, or lines of `studybench data ids` (# comments allowed).")], None),
    "exclude": (Annotated[list[str] | None, typer.Option("--exclude", metavar="ID", rich_help_panel=_S, help="Leave out this parent (repeatable).")], None),
    "exclude_file": (Annotated[Path | None, typer.Option("--exclude-file", metavar="FILE", rich_help_panel=_S, help="Leave out the parents listed in FILE (as --parents).")], None),
    "sample": (Annotated[int | None, typer.Option("--sample", metavar="N", rich_help_panel=_S, help="A seeded random sample of N parents (after --slice, --parent and the exclusions; before --limit).")], None),
    "sample_seed": (Annotated[int, typer.Option("--sample-seed", metavar="S", rich_help_panel=_S, help="The sample's seed: the same seed and test set give the same parents everywhere.")], 0),
    "stratify": (Annotated[str | None, typer.Option("--stratify", metavar="KEY", rich_help_panel=_S, help="Stratify the sample by source (book or olympiad) or problem_type (sub-discipline): each group gets its share.")], None),
    "errata": (Annotated[str, typer.Option("--errata", metavar="MODE", rich_help_panel=_S, help="official (the published golds, comparable with the paper; the report counts attempts on errata items) | apply (score with the corrected golds; parents with an unanswerable sub-problem left out) | exclude (leave out parents holding an erratum). List them: `studybench data errata`.")], "official"),
})
"""How ``studybench eval`` selects parents and which golds it scores (:mod:`studybench.evaluate.selection`)."""


def selection_spec(opts: dict[str, Any]) -> dict[str, Any]:
    """:class:`~studybench.evaluate.EvalSpec` selection fields from :data:`SELECTION_OPTIONS` values (id files read here).

    Fails (exit 2) naming the flag when an id file cannot be read or an option is out of range.
    """
    from studybench.evaluate import EvalError, read_parent_ids

    lists: dict[str, list[str]] = {"parent": list(opts["parent"] or []), "exclude": list(opts["exclude"] or [])}
    for name, key, flag in (("parents_file", "parent", "--parents"), ("exclude_file", "exclude", "--exclude-file")):
        if opts[name] is not None:
            try:
                lists[key] += read_parent_ids(opts[name])
            except EvalError as e:
                fail(f"{flag}: {e}")
    ids, excluded = lists["parent"], lists["exclude"]
    if opts["stratify"] is not None and opts["stratify"] not in ("source", "problem_type"):
        fail(f"--stratify must be source or problem_type, got {opts['stratify']!r}")
    if opts["errata"] not in ("official", "apply", "exclude"):
        fail(f"--errata must be official, apply or exclude, got {opts['errata']!r}")
    return {"parent_ids": ids or None, "exclude_ids": excluded, "sample": opts["sample"], "sample_seed": opts["sample_seed"],
            "stratify": opts["stratify"], "errata": opts["errata"]}
