"""``studybench artefact ...``: a self-evolution method's artefact turned into an ``eval`` input
(:mod:`studybench.methods.artefacts`).

``artefact evoskill SKILLS_DIR -o prompt.md`` inlines an EvoSkill skills folder into one system prompt
for ``eval --system-prompt``. (ACE playbooks need no conversion: ``eval --playbook`` reads them.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, plural
from studybench.files import atomic_write_text

__all__ = ["artefact_app"]

artefact_app = typer.Typer(
    help="Turn a method's artefact into an eval input: `evoskill` (a skills folder -> one system prompt).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@artefact_app.command("evoskill")
def evoskill_cmd(
    skills_dir: Annotated[Path, typer.Argument(help="EvoSkill's skills folder: SKILLS_DIR/<skill-name>/SKILL.md.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="System prompt file to write (for `eval --system-prompt`).")],
    exclude: Annotated[list[str] | None, typer.Option("--exclude", help="Skill folder to leave out (repeatable), besides the stock ones.")] = None,
    include_all: Annotated[bool, typer.Option("--include-all", help="Keep the agent's stock meta-skills (brainstorming, skill-creator, template-skill, template).")] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Refuse a prompt over this many tokens (built-in count; 0: no cap).")] = 12_000,
) -> None:
    """Inline every SKILL.md of an EvoSkill skills folder (sorted by folder; name, description, body)
    into one system prompt, leaving out the agent's stock meta-skills as the paper did."""
    from studybench.methods.artefacts import STOCK_SKILLS, ArtefactInputError, evoskill_prompt

    if max_tokens < 0:
        fail(f"--max-tokens must be >= 0, got {max_tokens}")
    if out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    skip = ([] if include_all else list(STOCK_SKILLS)) + list(exclude or [])
    try:
        prompt, skills = evoskill_prompt(skills_dir, skip, max_tokens or None)
    except ArtefactInputError as e:
        fail(str(e))
    try:
        atomic_write_text(out, prompt)
    except OSError as e:
        fail_write(e, out, resumable=False)
    # a folder name may hold ANSI escapes or other control characters: shown as \xNN, never sent to the terminal
    names = ", ".join("".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in s.folder) for s in skills)
    console.print(f"wrote {plural(len(skills), 'skill')} ({escape(names)}) to {escape(str(out))}", soft_wrap=True)
    folders = {p.name for p in skills_dir.iterdir() if p.is_dir()}
    stock = sorted(folders & set(STOCK_SKILLS)) if not include_all else []
    if stock:
        console.print(f"left out: {escape(', '.join(stock))} (the agent's stock meta-skills; --include-all keeps them)", soft_wrap=True)
    unmatched = sorted(set(exclude or []) - folders)
    if unmatched:
        console.print(f"[yellow]warning:[/yellow] --exclude {escape(', '.join(unmatched))}: no such skill folder in "
                      f"{escape(str(skills_dir))}", soft_wrap=True)
