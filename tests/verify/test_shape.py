"""The shape of the rule verifier (issue 25, item 7) and the answer type table every user reads.

* one table (:mod:`studybench.answer_types`): every answer type is one row and one rule module; the
  users of the types follow the table (a changed row changes what they do) and keep no list of their own;
* ``verify/`` reads as its pipeline (the layers themselves are import-linter's ``lint-imports``
  contract): no rule imports another rule or the registry, no import inside a function of ``verify/``
  (one that hides a cycle), and no module state a verdict could read from an earlier item.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import replace
from pathlib import Path

import pytest
from _support import REPO

from studybench.answer_types import COMPOUND_TYPES, AnswerType
from studybench.records import Parent, SubProblemRef

SRC = REPO / "src" / "studybench"
VERIFY = SRC / "verify"
RULES_DIR = VERIFY / "rules"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every import of a file (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, nested) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                out.append((base, child.lineno, nested))
                out.extend((f"{base}.{a.name}", child.lineno, nested) for a in child.names)
            visit(child, inner)

    visit(tree, False)
    return out


# --------------------------------------------------------------------------------------------------
# the table


def test_every_answer_type_is_one_row_and_one_rule_module() -> None:
    from studybench.verify.rules import COMPOUND_RULES, RULES, Rule

    modules = {p.stem for p in RULES_DIR.glob("*.py") if p.stem not in ("__init__", "_shared")}
    assert modules == {t.info.rule for t in AnswerType}, "a rule module no row names, or a row without its module"
    for t in AnswerType:
        module = importlib.import_module(f"studybench.verify.rules.{t.info.rule}")
        assert isinstance(module.RULE, Rule) and RULES[t] is module.RULE
        assert (module.RULE.compound is not None) == t.info.compound
        assert module.RULE.fast is not None or module.RULE.full is not None, t
    assert set(COMPOUND_RULES) == COMPOUND_TYPES == {t for t in AnswerType if t.info.compound}
    assert [t.value for t in AnswerType] == ["NV", "EX", "EQ", "TUP", "IN", "MC", "TF", "QL", "ALT"]  # paper 2.2


@pytest.mark.parametrize("change", [{"parts": "several"}, {"reading": "ocr"}, {"dense": "both"}, {"parts": "tuple"},
                                    {"reading": "slots"}], ids=str)
def test_a_row_outside_its_vocabulary_is_refused(change: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="answer type row|compound type"):
        replace(AnswerType.NV.info, **change)


def _ref(answer_type: str, answer: str, type_sequence: str = "") -> SubProblemRef:
    parent = Parent.model_validate({"source": "s", "source_problem_id": "1", "problem": "Q?", "answer": answer,
                                    "answer_type": answer_type, "type_sequence": type_sequence})
    return SubProblemRef(parent, 0, parent.subs()[0])


@pytest.mark.parametrize("t", list(AnswerType), ids=str)
def test_the_judge_is_told_the_label_of_the_table(t: AnswerType, monkeypatch: pytest.MonkeyPatch) -> None:
    from studybench.llm_judge.inputs import llm_judge_inputs

    ts = "NV,EX" if t.info.compound else ""
    ref = _ref(t.value, "\\boxed{1}, \\boxed{x}" if t.info.compound else "\\boxed{A}", ts)
    assert f"Answer type: {t.value} ({t.info.judge_label})" in llm_judge_inputs(ref, "", []).reference_answers
    monkeypatch.setattr(t, "info", replace(t.info, judge_label="a label only the table knows"))
    assert f"Answer type: {t.value} (a label only the table knows)" in llm_judge_inputs(ref, "", []).reference_answers


def test_the_dense_reward_checks_what_the_table_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from studybench import reward_scores, rewards

    monkeypatch.setattr(reward_scores, "_verifier", lambda: _NoVerifier())
    response = "Final Answer: \\boxed{3\\,\\mathrm{kg}}"
    assert rewards.dense_components(response, "\\boxed{3\\,\\mathrm{m}}", "NV")["dimensional"] == rewards.DENSE_WEIGHTS["wrong_dimension"]
    monkeypatch.setattr(AnswerType.NV, "info", replace(AnswerType.NV.info, dense=""))
    assert rewards.dense_components(response, "\\boxed{3\\,\\mathrm{m}}", "NV")["dimensional"] == 0.0
    expr = "Final Answer: \\boxed{a b}"
    assert rewards.dense_components(expr, "\\boxed{a b}", "QL")["symbolic"] == 0.0
    monkeypatch.setattr(AnswerType.QL, "info", replace(AnswerType.QL.info, dense="symbolic"))
    assert rewards.dense_components(expr, "\\boxed{a b}", "QL")["symbolic"] == rewards.DENSE_WEIGHTS["symbolic"]


class _NoVerifier:
    """Stands in for the reward verifier: every answer wrong, no worker started."""

    def verify(self, *args: object, **kw: object) -> object:
        from studybench.verify import Verdict

        return Verdict(False, "incorrect: stub", ())


def test_definitions_apply_to_the_types_the_table_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from studybench.verify.physics.definitions import extract_definitions

    problem = "Find $x$, where $\\tau = R C$."
    for t in AnswerType:
        assert bool(extract_definitions(problem, ["2 \\tau"], t.value)) is t.info.definitions, t
    monkeypatch.setattr(AnswerType.NV, "info", replace(AnswerType.NV.info, definitions=True))
    assert extract_definitions(problem, ["2 \\tau"], "NV")


def test_the_fuzz_draws_every_type_of_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    from studybench.testing.fuzz import fuzz_item

    drawn_from: list[list[object]] = []
    real = st.sampled_from
    monkeypatch.setattr(st, "sampled_from", lambda xs: (drawn_from.append(list(xs)), real(xs))[1])
    fuzz_item(str(tmp_path / "canary"))
    assert [t.value for t in AnswerType] in drawn_from


_PRIVATE_LISTS = [
    re.compile(r"""["'](?:TUP|ALT)["']\s*,\s*["'](?:TUP|ALT)["']"""),  # ("TUP", "ALT")
    re.compile(r"AnswerType\.(?:TUP|ALT)\s*,\s*AnswerType\.(?:TUP|ALT)"),  # (AnswerType.TUP, AnswerType.ALT)
    re.compile(r"""["'](?:NV|EX|EQ|IN|MC|TF|QL)["']\s*,\s*["'](?:NV|EX|EQ|IN|MC|TF|QL)["']\s*,\s*["'](?:NV|EX|EQ|IN|MC|TF|QL)["']"""),
    re.compile(r"AnswerType\.(?:NV|EX|EQ|IN|MC|TF|QL)\s*,\s*AnswerType\.(?:NV|EX|EQ|IN|MC|TF|QL)\s*,\s*AnswerType\."),
    re.compile(r"""^\s*["'](?:NV|EX|EQ|TUP|IN|MC|TF|QL|ALT)["']\s*:\s*["']""", re.M),  # a dict keyed by type names
]
_USERS = ["records.py", "llm_judge/inputs.py", "rewards.py", "reward_scores.py", "methods/ttrl.py", "testing/fuzz.py",
          "verify/physics/definitions.py", "verify/rules/__init__.py"]


@pytest.mark.parametrize("rel", _USERS)
def test_users_of_the_types_keep_no_list_of_their_own(rel: str) -> None:
    text = (SRC / rel).read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found = [m.group(0) for pat in _PRIVATE_LISTS for m in pat.finditer(code)]
    assert not found, f"{rel} lists answer types itself (read studybench.answer_types instead): {found}"


# --------------------------------------------------------------------------------------------------
# the shape of verify/


@pytest.mark.parametrize("path", sorted(p for p in RULES_DIR.glob("*.py") if p.stem not in ("__init__", "_shared")),
                         ids=lambda p: p.name)
def test_no_rule_imports_another_rule_or_the_registry(path: Path) -> None:
    own = f"studybench.verify.rules.{path.stem}"
    bad = [(m, line) for m, line, _ in _imports(path)
           if m == "studybench.verify.rules" or (m.startswith("studybench.verify.rules.") and not m.startswith(
               ("studybench.verify.rules._shared", own)))]
    assert not bad, f"{path.name} imports another rule or the registry (fall back through Context.full): {bad}"


@pytest.mark.parametrize("path", sorted(VERIFY.rglob("*.py")), ids=lambda p: str(p.relative_to(VERIFY)))
def test_no_import_of_the_verifier_inside_a_function(path: Path) -> None:
    bad = [(m, line) for m, line, nested in _imports(path) if nested and m.startswith("studybench.verify")]
    assert not bad, f"{path.relative_to(SRC)} imports inside a function (a hidden cycle?): {bad}"


_LAZY_HANDLES = {"_SY", "_L2S_CONFIG", "_UREG", "_CONSTANTS", "_DEFAULT"}
"""Module globals ``verify/`` may assign: libraries' objects built on first use (SymPy, latex2sympy's
config, pint's registry and its constants) and the process-wide default Verifier; none holds an item."""
_MEMOS = {"_l2s_parse": "keyed on the aliased text and the fast-parser switch", "identities": "takes no argument"}


def test_verify_keeps_no_state_between_items() -> None:
    bad: list[str] = []
    for path in sorted(VERIFY.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                bad += [f"{rel}:{node.lineno}: global {n}" for n in node.names if n not in _LAZY_HANDLES]
            if isinstance(node, ast.Name) and node.id == "ContextVar" or isinstance(node, ast.Attribute) and node.attr == "ContextVar":
                bad.append(f"{rel}:{node.lineno}: ContextVar")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    name = ast.unparse(d)
                    if re.search(r"\b(?:lru_cache|cache)\b", name) and node.name not in _MEMOS:
                        bad.append(f"{rel}:{node.lineno}: memo {node.name} (say what its key holds in _MEMOS)")
    assert not bad, bad
