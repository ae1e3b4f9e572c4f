"""The README and the pages under docs/ stay true to the code.

- Every ``studybench ...`` command line they show (in shell blocks and in inline code) names a real
  command and only options that command has: the typer app is walked, so a renamed command or option
  fails here, not in a reader's terminal. So does every ``python -m studybench.testing.stub_server``
  line, against that program's own options.
- Every relative link resolves: the file exists and, for a link into a page, the heading its anchor
  names exists (slugs as the docs site makes them). ``mkdocs build --strict`` checks the links between
  pages too (CI), but not the README's links into docs/, and it needs MkDocs installed.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import typer.main
from _support import REPO

from studybench.cli import app

ROOT = REPO
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
STUB = "studybench.testing.stub_server"
SEPARATORS = {";", "&", "&&", "|", "||", ">", ">>", "<", "(", ")"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ----------------------------------------------------------------------------- commands


def shell_lines(text: str) -> list[tuple[str, bool]]:
    """The command lines of the page, each with whether it is a shell line (code blocks, continuations
    joined) rather than an inline code span (where ``a|b`` means "a or b", not a pipe)."""
    lines: list[tuple[str, bool]] = []
    for m in FENCE.finditer(text):
        if m.group(2).strip().lower() in SHELL_LANGS:
            lines += [(line, True) for line in m.group(3).replace("\\\n", " ").splitlines()]
    prose = FENCE.sub("", text)
    lines += [(span.replace("\n", " "), False) for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    return lines


def commands(line: str, shell: bool = True) -> list[list[str]]:
    """The ``studybench`` invocations of one line, as argument lists (after ``studybench``)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()" if shell else ";&<>()")
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:  # an unbalanced quote: prose in a code span, not a command line
        return []
    out: list[list[str]] = []
    segment: list[str] = []
    for tok in [*tokens, ";"]:
        if tok in SEPARATORS:
            words = [w for w in segment if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w)]  # VAR=value prefixes
            while words and words[0] in {"do", "then", "else", "time", "nohup", "exec", "!"}:
                words = words[1:]
            if words and words[0] == "studybench":
                out.append(words[1:])
            elif words[:3] == ["python", "-m", STUB]:  # the stub server's command line
                out.append([STUB, *words[3:]])
            segment = []
        else:
            segment.append(tok)
    return out


def option_names(cmd: Any) -> set[str]:
    """The option names of a command (typer ships its own copy of click: walked by attribute)."""
    names = {"--help", "-h"}
    for p in cmd.params:
        if p.param_type_name == "option":
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def stub_options() -> set[str]:
    """The options of ``python -m studybench.testing.stub_server`` (an argparse program), from its help."""
    from studybench.testing import stub_server

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        stub_server.main(["--help"])
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out.getvalue()))


def check_command(root: Any, args: list[str]) -> str | None:
    """Why ``studybench ARGS`` is not a real command line, or ``None`` when it is."""
    if args[:1] == [STUB]:
        bad = [a.split("=", 1)[0] for a in args[1:] if re.match(r"--?[A-Za-z]", a) and a.split("=", 1)[0] not in stub_options()]
        return f"`python -m {STUB}` has no option {bad[0]}" if bad else None
    cmd = root
    path = ["studybench"]
    i = 0
    while hasattr(cmd, "commands") and i < len(args):
        tok = args[i].strip("[]")
        if tok.startswith("-") or "..." in tok:
            break
        sub = cmd.commands.get(tok)
        if sub is None:
            return f"`{' '.join(path)}` has no command {tok!r} (it has: {', '.join(sorted(cmd.commands))})"
        cmd, path, i = sub, [*path, tok], i + 1
    known = option_names(cmd)
    for raw in args[i:]:
        tok = raw.strip("[]")
        if "..." in tok or not re.match(r"--?[A-Za-z]", tok):
            continue
        name = tok.split("=", 1)[0]
        if name not in known:
            return f"`{' '.join(path)}` has no option {name}"
    return None


def documented_commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for page in DOCS:
        for line, shell in shell_lines(page.read_text(encoding="utf-8")):
            for args in commands(line, shell):
                found.append((_rel(page), line.strip(), args))
    return found


def test_every_documented_command_line_names_a_real_command_and_real_options() -> None:
    root = typer.main.get_command(app)
    found = documented_commands()
    pages = {page for page, _, _ in found}
    assert len(found) > 100 and {"README.md", "docs/guides/evaluate.md", "docs/guides/build-testset.md"} <= pages
    wrong = [f"{page}: {line}\n    {why}" for page, line, args in found if (why := check_command(root, args))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("args", "why"), [
    (["eval", "--split", "transfer", "--modle", "m"], "`studybench eval` has no option --modle"),
    (["evaluate", "--split", "x"], "has no command 'evaluate'"),
    (["build", "retreive", "--work", "W"], "`studybench build` has no command 'retreive'"),
    (["build", "retry", "--work", "W", "--out", "x"], None),  # --out: whatever build retry has, said below
    (["report", "RUN", "--html-out=x.html"], None),
    (["--version"], None),
    (["build", "..."], None),
    ([STUB, "--port", "0", "--max-model-len", "4096"], None),
    ([STUB, "--port", "0", "--n-ctx-size", "4096"], f"`python -m {STUB}` has no option --n-ctx-size"),
])
def test_the_checker_finds_made_up_commands_and_options(args: list[str], why: str | None) -> None:
    root = typer.main.get_command(app)
    got = check_command(root, args)
    if args[:2] == ["build", "retry"]:  # an option that exists on one command and not another
        retry = root.commands["build"].commands["retry"]
        assert (got is None) == ("--out" in option_names(retry))
    elif why is None:
        assert got is None
    else:
        assert got is not None and why in got


def test_command_lines_are_read_from_blocks_spans_and_continuations() -> None:
    text = ("Run `studybench report RUN -k 1,4` or:\n\n```bash\nX=1 studybench eval --split t \\\n"
            "    --model m | tee log   # a comment --not-an-option\npython -m pytest -q\n"
            "python -m studybench.testing.stub_server --port 0 &\n```\n\n"
            "```python\nstudybench = 1  # not a shell line\n```\n")
    text += "and `studybench plateau snapshots.csv [--metric sub|par] [--out PREFIX]`\n"
    found = [args for line, shell in shell_lines(text) for args in commands(line, shell)]
    assert sorted(found) == [["eval", "--split", "t", "--model", "m"],
                             ["plateau", "snapshots.csv", "[--metric", "sub|par]", "[--out", "PREFIX]"],
                             ["report", "RUN", "-k", "1,4"], [STUB, "--port", "0"]]


# ----------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """The anchor the docs site (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.M):
        title = m.group(1)
        explicit = re.search(r"\{:?\s*#([\w-]+)[^}]*\}\s*$", title)
        out.add(explicit.group(1) if explicit else slug(title))
    return out


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"(?<!`)`[^`]+`(?!`)", "", text)
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def link_problem(page: Path, target: str) -> str | None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{target}: no file {_rel(dest)}"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{target}: {_rel(dest)} has no heading with the anchor #{anchor}"
    return None


def test_every_relative_link_in_the_readme_and_the_docs_resolves() -> None:
    checked = 0
    wrong = []
    for page in DOCS:
        for target in relative_links(page):
            checked += 1
            if why := link_problem(page, target):
                wrong.append(f"{_rel(page)}: {why}")
    assert checked > 100
    assert not wrong, "\n".join(wrong)


def test_the_link_checker_sees_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# B\n\n## Reproducible runs: `studybench reproduce`\n\n```\n## Not a heading\n```\n")
    page.write_text("[ok](b.md#reproducible-runs-studybench-reproduce) [bad](b.md#not-a-heading) [gone](c.md) "
                    "[web](https://example.org/x.md) `[code](d.md)`\n")
    links = relative_links(page)
    assert links == ["b.md#reproducible-runs-studybench-reproduce", "b.md#not-a-heading", "c.md"]
    assert [link_problem(page, t) is None for t in links] == [True, False, False]


def test_the_readme_stays_short_and_keeps_the_two_set_up_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 160
    for line in ('pip install -e ".[dev,audit,analysis,train,gepa,build,onnx,ray,router]"',
                 "studybench eval --split transfer --model reference -k 1",
                 "python -m pytest -q -n auto --dist loadfile"):
        assert line in text


# ----------------------------------------------------------------------------- documented results


def commented_results(code: str) -> list[tuple[ast.stmt, object]]:
    """The top-level expressions of a block whose line ends in ``# VALUE`` (a Python literal, maybe
    followed by a remark in parentheses), with that value."""
    lines = code.splitlines()
    out = []
    for stmt in ast.parse(code).body:
        comment = lines[(stmt.end_lineno or stmt.lineno) - 1].partition("  # ")[2].strip()
        if not isinstance(stmt, ast.Expr) or not comment:
            continue
        with contextlib.suppress(ValueError, SyntaxError):
            out.append((stmt, ast.literal_eval(comment.split(" (", 1)[0])))
    return out


def test_the_reward_examples_return_what_their_comments_say() -> None:
    """The reward examples of docs/guides/train.md (once the README's), run: each commented value is the result."""
    page = ROOT / "docs" / "guides" / "train.md"
    blocks = [m.group(3) for m in FENCE.finditer(page.read_text(encoding="utf-8"))
              if m.group(2).strip() == "python" and "from studybench.rewards import" in m.group(3)
              and commented_results(m.group(3))]  # not the GRPOTrainer example: it needs trl and a model
    checked = 0
    for code in blocks:
        namespace: dict[str, object] = {"__name__": "docs_example"}
        expected = {s.lineno: v for s, v in commented_results(code)}
        for stmt in ast.parse(code).body:
            if stmt.lineno in expected and isinstance(stmt, ast.Expr):
                got = eval(compile(ast.Expression(stmt.value), str(page), "eval"), namespace)  # our own docs, not input
                assert got == pytest.approx(expected[stmt.lineno]), ast.unparse(stmt)
                checked += 1
            else:
                exec(compile(ast.Module([stmt], []), str(page), "exec"), namespace)  # our own docs, not input
    assert checked >= 4


def test_commented_results_are_read_as_values() -> None:
    code = "x = 1  # 5\nf(x)  # -0.1 (wrong, wrong dimension)\ng()  # [1.0, 0.0]\nh()  # not a value\n"
    assert [(ast.unparse(s), v) for s, v in commented_results(code)] == [("f(x)", -0.1), ("g()", [1.0, 0.0])]


def _roles_hook() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Page:
    class file:  # noqa: N801  (the shape of mkdocs' Page.file)
        src_uri = "reference/x.md"


def test_the_docs_hook_turns_sphinx_roles_into_code_and_refuses_names_that_do_not_exist(caplog: Any) -> None:
    hooks = _roles_hook()
    page = (":class:<code>~studybench.evaluate.spec.EvalSpec</code> :func:<code>run_eval</code> "
            ":meth:<code>studybench.evaluate.EvalSpec.merge()</code> :data:<code>studybench.datasets.OFFICIAL_SPLITS</code> "
            ":attr:<code>studybench.evaluate.spec.DataSpec.k</code>")
    with caplog.at_level("WARNING"):
        out = hooks.on_page_content(page, page=_Page())
    assert ":class:" not in out and ":func:" not in out and ":meth:" not in out
    assert '<autoref identifier="studybench.evaluate.spec.EvalSpec" optional><code>EvalSpec</code></autoref>' in out
    assert "<code>run_eval</code>" in out and "<code>studybench.evaluate.EvalSpec.merge()</code>" in out
    assert not caplog.records  # every name above exists (a pydantic field counts)
    for stale in ("studybench.metrics.no_such_function", "studybench.build_old.x", "studybench.evaluate.EvalSpec.nope"):
        caplog.clear()
        with caplog.at_level("WARNING"):
            out = hooks.on_page_content(f":func:<code>{stale}</code>", page=_Page())
        assert out == f"<code>{stale}</code>"
        assert any(stale in r.getMessage() for r in caplog.records)  # a warning: --strict fails the build
