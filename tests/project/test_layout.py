"""The package's layout rules (docs/architecture.md): no module imports another module's private names,
every ``__all__`` names what the module defines, source files stay small (or say why). The one-way import layers are
checked by import-linter (``lint-imports``, configured in pyproject.toml), run in CI next to these."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from _support import REPO

SRC = REPO / "src" / "studybench"
FILES = sorted(p for p in SRC.rglob("*.py") if "egg-info" not in str(p))
MAX_LINES = 600
REASON = "Longer than 600 lines because"
"""A source file over MAX_LINES says why in its module docstring, in a sentence starting with this."""


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_private_names_imported_from_other_modules(path: Path) -> None:
    module = _module(path)
    package = _package_of(module, path)
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level:
            continue
        src = node.module or ""
        if not src.startswith("studybench"):
            continue
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and src != module:
                bad.append(f"{src}.{alias.name}")
        if src.split(".")[-1].startswith("_") and not src.startswith(package):
            bad.append(src)
    assert not bad, f"{module} imports private names of other modules: {bad}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_dunder_all_is_true(path: Path) -> None:
    module = _module(path)
    if module.endswith("__main__"):
        return
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        return
    assert len(set(names)) == len(names), f"{module}.__all__ lists a name twice"
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_source_files_stay_small(path: Path) -> None:
    rel = str(path.relative_to(SRC).as_posix())
    text = path.read_text(encoding="utf-8")
    n = len(text.splitlines())
    if n <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(text)) or ""
    says_why = REASON in " ".join(doc.split())
    assert says_why, (
        f"{rel} has {n} lines (more than {MAX_LINES}); split it or say why in its module docstring "
        f"('{REASON} ...')"
    )


KEPT_NAMES = {
    # modules split under MAX_LINES (issue 26): every name they exported before is still exported from them
    "studybench.files": "InputFileError JsonlLog MAX_DATA_BYTES MAX_JSON_BYTES MAX_LOG_BYTES MAX_LOG_LINE_BYTES "
                        "MAX_TEXT_BYTES append_text atomic_write_bytes atomic_write_lines atomic_write_text decode_utf8 "
                        "dumps_json file_sha256 json_line jsonl_lines parse_json read_json read_user_bytes read_user_text "
                        "text_digest",
    "studybench.models.http11": "ConnectError ConnectTimeout Http11Pool HttpError HttpResponse HttpStatusError HttpTimeout "
                                "MAX_BODY_BYTES MAX_HEAD_BYTES ReadError ReadTimeout RemoteProtocolError dumps_body "
                                "loads_body proxy_for sendable split_query",
    "studybench.rewards": "DENSE_WEIGHTS close_reward_verifier compute_score compute_score_batch compute_score_batch_dense "
                          "compute_score_dense dense_components dense_reward_for reward_for reward_verifier trl_reward "
                          "trl_reward_dense",
    "studybench.models.openai_backend": "HTTP_CLIENTS HTTP_CLIENT_ENV OpenAIBackend PROMPT_ESTIMATE estimate_prompt_tokens "
                                        "is_retryable redact_url split_query",
    "studybench.verify.verifier": "Item MAX_FAST_CHARS MAX_PRED_BOXES MAX_PRED_CHARS Verifier check_gold_parsable "
                                  "default_verifier extract_pair verify_boxes verify_response",
    "studybench.verify.reading.latex": "LatexError bar_to_prime expand_braceless join_digit_groups norm_string norm_text "
                                       "relation_chain rhs split_relations states_inequality strip_text_remarks tokenize "
                                       "value_link vector_tuple",
}


@pytest.mark.parametrize("module", sorted(KEPT_NAMES))
def test_split_modules_still_export_their_names(module: str) -> None:
    mod = importlib.import_module(module)
    lost = [n for n in KEPT_NAMES[module].split() if n not in getattr(mod, "__all__", ()) or not hasattr(mod, n)]
    assert not lost, f"{module} no longer exports {lost} (re-export what a split moved out)"
