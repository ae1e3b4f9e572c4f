"""Artefacts of self-evolution methods turned into what ``studybench eval`` takes.

EvoSkill evolves a skills folder (``.claude/skills/`` in its project) in the Claude Agent Skills
layout::

    SKILLS_DIR/<skill-name>/SKILL.md       YAML front matter (name, description), then the body
    SKILLS_DIR/<skill-name>/<other files>  optional (scripts, references): not inlined

:func:`evoskill_prompt` inlines the skills into one system prompt for ``eval --system-prompt``: a
short header, then for each skill (sorted by folder name) its name, description and ``SKILL.md``
body. The agent's stock meta-skills (:data:`STOCK_SKILLS`), which EvoSkill did not evolve, are left
out as in the paper. ACE playbooks need no conversion: ``eval --playbook`` reads them as ACE writes
them (:func:`studybench.protocol.clean_ace_playbook`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from studybench.files import MAX_TEXT_BYTES, InputFileError, read_user_text
from studybench.protocol import PLAYBOOK_MAX_TOKENS
from studybench.tokens import count_tokens

__all__ = [
    "EVOSKILL_HEADER",
    "STOCK_SKILLS",
    "ArtefactInputError",
    "Skill",
    "evoskill_prompt",
    "read_skills",
]

STOCK_SKILLS = ("brainstorming", "skill-creator", "template-skill", "template")
"""Skill folders shipped with the agent, not evolved, left out by default: EvoSkill's base
meta-skills in ``.claude/skills/`` (``brainstorming``, which its skill proposer runs first, and
``skill-creator``, which its skill generator reads) and the skill templates of Anthropic's skills
repository (``template-skill``, ``template``)."""

EVOSKILL_HEADER = (
    "You are an expert physicist. Solve physics problems carefully and rigorously.\n\n"
    "The skills below were learned on earlier problems. Each says when it applies; use the ones that "
    "fit the problem silently, and do not mention or quote them in your answer."
)

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_KEY = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:(.*)$")


class ArtefactInputError(ValueError):
    """An artefact folder or file that cannot be converted; the message names it."""


@dataclass(frozen=True)
class Skill:
    """One skill: its folder name, front-matter name and description, and the ``SKILL.md`` body."""

    folder: str
    name: str
    description: str
    body: str


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _front_matter(text: str, path: Path) -> tuple[dict[str, str], str]:
    """The ``key: value`` pairs of the front matter and the body after it (minimal YAML subset)."""
    m = _FRONT_MATTER.match(text)
    if m is None:
        raise ArtefactInputError(f"{path}: no front matter (expected a first line '---', then name: and description:, then '---')")
    fields: dict[str, str] = {}
    last: str | None = None
    for n, line in enumerate(m.group(1).splitlines(), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t" and last is not None:  # a folded continuation line
            fields[last] = f"{fields[last]} {line.strip()}".strip()
            continue
        kv = _KEY.match(line)
        if kv is None:
            raise ArtefactInputError(f"{path}: line {n}: front matter line is not 'key: value': {line.strip()[:80]!r}")
        last = kv.group(1)
        value = kv.group(2).strip()
        fields[last] = "" if value in ("|", ">", "|-", ">-") else _unquote(value)
    return fields, text[m.end():]


def read_skills(skills_dir: Path, exclude: Iterable[str] = STOCK_SKILLS) -> list[Skill]:
    """The skills of an EvoSkill folder, sorted by folder name.

    Args:
        skills_dir: the folder holding ``<skill-name>/SKILL.md``.
        exclude: skill folder names to leave out (default :data:`STOCK_SKILLS`).

    Returns:
        The skills kept.

    Raises:
        ArtefactInputError: not a folder, no skill left, a ``SKILL.md`` that is unreadable, not
            UTF-8, or whose front matter is missing, malformed or has no ``name``.
    """
    skills_dir = Path(skills_dir)
    if not skills_dir.is_dir():
        raise ArtefactInputError(f"{skills_dir}: not a folder (expected SKILLS_DIR/<skill-name>/SKILL.md)")
    skip = set(exclude)
    out: list[Skill] = []
    found = 0
    for folder in sorted(p for p in skills_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        path = folder / "SKILL.md"
        if not (path.exists() or path.is_symlink()):  # a FIFO, a directory, a dangling link: refused below, not skipped
            continue
        found += 1
        if folder.name in skip:
            continue
        try:
            text = read_user_text(path, limit=MAX_TEXT_BYTES)
        except InputFileError as e:
            raise ArtefactInputError(str(e)) from None
        fields, body = _front_matter(text, path)
        if not fields.get("name"):
            raise ArtefactInputError(f"{path}: front matter has no 'name'")
        out.append(Skill(folder.name, fields["name"], fields.get("description", ""), body.strip()))
    if not out and not found and (skills_dir / "SKILL.md").is_file():
        raise ArtefactInputError(f"{skills_dir}: this is one skill's folder (it holds SKILL.md); give the folder "
                                 f"above it, SKILLS_DIR/<skill-name>/SKILL.md ({skills_dir.resolve().parent})")
    if not out:
        left = f" ({found} left out by --exclude / the stock list)" if found else ""
        raise ArtefactInputError(f"{skills_dir}: no skills (no <skill-name>/SKILL.md{left})")
    return out


def evoskill_prompt(
    skills_dir: Path,
    exclude: Iterable[str] = STOCK_SKILLS,
    max_tokens: int | None = PLAYBOOK_MAX_TOKENS,
) -> tuple[str, list[Skill]]:
    """One system prompt inlining an EvoSkill skills folder.

    Args:
        skills_dir: the folder holding ``<skill-name>/SKILL.md``.
        exclude: skill folder names to leave out (default :data:`STOCK_SKILLS`).
        max_tokens: the most built-in tokens (:func:`studybench.tokens.count_tokens`) the prompt may
            hold; ``None`` or 0: no cap.

    Returns:
        The prompt (ends with a newline) and the skills it holds.

    Raises:
        ArtefactInputError: as :func:`read_skills`, or the prompt is over ``max_tokens``.
    """
    skills = read_skills(skills_dir, exclude)
    parts = [EVOSKILL_HEADER]
    for s in skills:
        block = f"## Skill: {s.name}"
        if s.description:
            block += f"\n\n{s.description}"
        if s.body:
            block += f"\n\n{s.body}"
        parts.append(block)
    prompt = "\n\n".join(parts) + "\n"
    if max_tokens:
        n = count_tokens(prompt)
        if n > max_tokens:
            raise ArtefactInputError(
                f"{skills_dir}: the prompt from {len(skills)} skills is {n:,} tokens (built-in count), over the "
                f"cap of {max_tokens:,}; raise it with --max-tokens N (0: no cap) or --exclude skills"
            )
    return prompt, skills
