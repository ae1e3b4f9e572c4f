"""Keeping API keys out of run directories, reports, caches and console output.

One of the lowest modules of the package (it imports nothing of studybench). Two kinds of redaction,
each replacing what it finds with ``***``:

- **Configured secrets** (:func:`redact`, :func:`redact_obj`): the exact values of the keys in use
  (the API key read from the environment, a password or ``?api_key=`` value given inside a base
  URL), in their plain and URL-encoded forms, and, for secrets of at least
  :data:`MIN_MODEL_TEXT_SECRET_LENGTH` characters, base64-encoded as a server can echo them
  (:func:`encoded_forms`): standard and URL-safe base64, padded or not, also inside a longer base64
  string (a ``Basic`` header built from ``user:password``, a blob holding the key), where the key's
  bytes are encoded differently at each of the 3 byte offsets modulo 3; the whole base64 run holding
  one is masked, and so is its URL-encoded form. This is the only redaction applied to model text
  (completions, reasoning, judge replies), and there only for secrets of at least
  :data:`MIN_MODEL_TEXT_SECRET_LENGTH` characters (:func:`redact_model_text`): a short key such as
  ``1234`` would otherwise turn the answer ``\\boxed{1234}`` into ``\\boxed{***}`` and score it wrong.
  Text that holds no such secret is never altered, so the text stored and judged is the model's text.
- **Token shapes** (:func:`redact_token_shapes`): well-delimited strings that look like a key even
  when no key is configured: an ``sk-`` token of at least 20 more characters that starts at a word
  boundary, and ``Bearer <token>`` where the token is a run of at least 20 base64/hex-like
  characters holding both a letter and a digit. ``disk-shaped``, ``risk-free``, ``bearer ring}}``
  or ``\\text{sk-1}`` do not match. Applied, with the configured secrets, to everything else a
  server sends back (finish reasons, usage keys, response ids, error messages) and to recorded
  command lines (:func:`redact_text`).

URLs (:func:`redact_url`) lose their ``user:password@`` part and the values of query parameters
that carry credentials (``key``, ``api_key``, ``token``, ``access_token``, ``sig`` ...);
:func:`url_secrets` returns those values so that a server echoing them can be redacted too.
Nothing here raises on any ``str`` input.
"""

from __future__ import annotations

import base64
import functools
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "MIN_MODEL_TEXT_SECRET_LENGTH",
    "MIN_SECRET_LENGTH",
    "PLACEHOLDER_KEYS",
    "SENSITIVE_QUERY_PARAMS",
    "Redactor",
    "env_name_problem",
    "encoded_forms",
    "env_secrets",
    "known_secrets",
    "redact",
    "redact_command",
    "redact_model_text",
    "redact_obj",
    "redact_text",
    "redact_token_shapes",
    "redact_url",
    "url_secrets",
]

MASK = "***"

MIN_SECRET_LENGTH = 4
"""Configured values shorter than this are not treated as secrets (redacting them would alter ordinary text)."""

MIN_MODEL_TEXT_SECRET_LENGTH = 8
"""Model text (completions, reasoning, judge replies) is redacted only of secrets at least this long:
the model never sees the key, and a shorter one (``1234``, ``abcd``) is likely to be part of an answer."""

PLACEHOLDER_KEYS = frozenset(
    {"empty", "none", "null", "dummy", "test", "local", "no-key", "sk-no-key-required", "ollama", "lm-studio"}
)
"""Publicly documented stand-ins for "no key" (vLLM's ``EMPTY``, llama.cpp's ``sk-no-key-required``,
Ollama's ``ollama`` ...), compared case-insensitively; never treated as secrets, so that an answer
holding such a word is not altered."""

SENSITIVE_QUERY_PARAMS = frozenset(
    {
        "key", "api_key", "apikey", "api-key", "x-api-key", "token", "access_token", "auth", "auth_token",
        "id_token", "refresh_token", "sig", "signature", "secret", "client_secret", "password", "passwd",
        "pwd", "code", "x-amz-signature", "x-amz-security-token", "x-goog-signature", "sv_token",
    }
)
"""Query parameter names (case-insensitive) whose values :func:`redact_url` masks."""

_SECRET_FLAGS = frozenset({"--api-key", "--key", "--token", "--password", "--secret"})
_TOKEN_CHARS = "A-Za-z0-9._~+/=-"
_SK = re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}")
_BEARER = re.compile(rf"(?<![A-Za-z0-9_])(bearer\s+)([{_TOKEN_CHARS}]{{20,}})", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def known_secrets(values: Iterable[str | None]) -> tuple[str, ...]:
    """The values worth redacting, longest first.

    Args:
        values: candidate secret values (``None`` and empty strings allowed).

    Returns:
        Distinct values, without placeholders (:data:`PLACEHOLDER_KEYS`) and values shorter than
        :data:`MIN_SECRET_LENGTH`, longest first (so a secret holding another is masked whole).
    """
    seen = {
        v for v in values
        if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH and v.strip().lower() not in PLACEHOLDER_KEYS
    }
    return tuple(sorted(seen, key=lambda v: (-len(v), v)))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of the environment variable holding a key, if it cannot.

    Catches the key itself given where its variable's name belongs; the message never repeats it.

    Args:
        name: what was given.

    Returns:
        ``None`` for a variable name (letters, digits, ``_``; not starting with a digit), else a
        message to put after the option's name (``--api-key-env: ...``).
    """
    if isinstance(name, str) and _ENV_NAME.fullmatch(name):
        return None
    return ("takes the NAME of an environment variable holding the key (e.g. OPENAI_API_KEY), not the key "
            "itself; the value given is not a variable name (not shown, in case it is a key)")


def env_secrets(names: Iterable[str | None]) -> tuple[str, ...]:
    """The secrets held by environment variables.

    Args:
        names: environment variable names (e.g. ``"OPENAI_API_KEY"``); ``None`` or unset ones are skipped.

    Returns:
        :func:`known_secrets` of their values.
    """
    return known_secrets(os.environ.get(n) for n in names if n)


@functools.lru_cache(maxsize=256)
def _forms(secret: str) -> tuple[str, ...]:
    forms = [secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)]
    out: list[str] = []
    for f in forms:
        if f not in out:
            out.append(f)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def encoded_forms(secret: str) -> tuple[str, ...]:
    """The base64 encodings of ``secret`` that a server may echo, as substrings that hold only the secret's bytes.

    Base64 encodes 3 bytes as 4 characters, so the secret's bytes inside a longer base64 string (a
    ``Basic`` header of ``user:password``, a JSON blob) are encoded differently at each byte offset
    modulo 3. For each offset the characters that depend on the secret's bytes alone (its whole
    3-byte groups) are one stable substring; its standard and URL-safe spellings and their
    URL-encoded forms are returned. The plain base64 of the secret (padded or not) holds the offset-0
    substring. :func:`redact` masks the whole base64 run around any of them.

    Args:
        secret: a configured secret.

    Returns:
        Distinct substrings of at least 8 characters; ``()`` for a secret shorter than
        :data:`MIN_MODEL_TEXT_SECRET_LENGTH` (its encodings are too short to be told from other text).
    """
    if len(secret) < MIN_MODEL_TEXT_SECRET_LENGTH:
        return ()
    raw = secret.encode("utf-8", "surrogatepass")
    out: list[str] = []
    for offset in range(3):
        skip = (3 - offset) % 3  # secret bytes that share a group with the bytes before them
        whole = raw[skip: skip + 3 * ((len(raw) - skip) // 3)]
        if len(whole) < 6:
            continue
        std = base64.b64encode(whole).decode("ascii")
        for form in (std, std.replace("+", "-").replace("/", "_")):
            for f in (form, quote(form, safe="")):
                if f not in out:
                    out.append(f)
    return tuple(out)


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_HEX = frozenset("0123456789ABCDEFabcdef")


def _mask_encoded(text: str, form: str) -> str:
    """``text`` with every base64 run (or its URL-encoded form) that holds ``form`` replaced by ``***``.

    Linear time: each occurrence is widened to its run by scanning, never by a backtracking pattern.
    """
    out: list[str] = []
    done = 0
    while (j := text.find(form, done)) >= 0:
        start, end = j, j + len(form)
        while start > done:
            if start - 3 >= done and text[start - 3] == "%" and text[start - 2] in _HEX and text[start - 1] in _HEX:
                start -= 3
            elif text[start - 1] in _B64:
                start -= 1
            else:
                break
        while end < len(text):
            if text[end] == "%" and end + 2 < len(text) and text[end + 1] in _HEX and text[end + 2] in _HEX:
                end += 3
            elif text[end] in _B64:
                end += 1
            else:
                break
        for _ in range(2):  # padding: "=" or its URL-encoded "%3D"
            if text.startswith("=", end):
                end += 1
            elif text[end:end + 3].upper() == "%3D":
                end += 3
        out += [text[done:start], MASK]
        done = end
    out.append(text[done:])
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _steps(secrets: tuple[Any, ...]) -> tuple[tuple[str, bool], ...]:
    """What :func:`redact` looks for, in order: ``(form, base64-encoded)`` of every secret, longest secret first."""
    steps: list[tuple[str, bool]] = []
    for secret in known_secrets(secrets):
        steps += [(form, False) for form in _forms(secret)]
        steps += [(form, True) for form in encoded_forms(secret)]
    return tuple(steps)


def _apply(text: str, steps: tuple[tuple[str, bool], ...]) -> str:
    for form, encoded in steps:
        if form in text:
            text = _mask_encoded(text, form) if encoded else text.replace(form, MASK)
    return text


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every configured secret (plain, URL-encoded or base64-encoded) replaced by ``***``.

    The base64 forms (:func:`encoded_forms`) mask the whole base64 run that holds the secret.

    Args:
        text: any string (model text, a server's message, a command-line argument).
        secrets: the secret values (see :func:`known_secrets`); filtered again here.

    Returns:
        ``text`` unchanged (the same object) when it holds none of them.
    """
    if not secrets or not isinstance(text, str) or not text:
        return text
    try:
        steps = _steps(tuple(secrets))
    except TypeError:  # an unhashable value among them: not a secret, but do not fail over it
        steps = _steps(tuple(x for x in secrets if isinstance(x, str)))
    return _apply(text, steps)


def redact_model_text(text: str, secrets: Sequence[str]) -> str:
    """:func:`redact` for model text: only secrets of at least :data:`MIN_MODEL_TEXT_SECRET_LENGTH` characters.

    Args:
        text: a completion, reasoning text or judge reply.
        secrets: the configured secret values.

    Returns:
        ``text`` with those secrets masked; unchanged (the same object) when it holds none.
    """
    return redact(text, [x for x in secrets if isinstance(x, str) and len(x) >= MIN_MODEL_TEXT_SECRET_LENGTH])


def _bearer(m: re.Match[str]) -> str:
    token = m.group(2)
    if any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
        return m.group(1) + MASK
    return m.group(0)


def redact_token_shapes(text: str) -> str:
    """``text`` with well-delimited key-shaped strings masked (see the module docstring).

    Args:
        text: any string.

    Returns:
        ``sk-`` tokens (20+ characters after the prefix, not inside a word) replaced by ``sk-***``
        and ``Bearer <token>`` (a 20+ character base64/hex-like run with a letter and a digit) by
        ``Bearer ***``; everything else unchanged.
    """
    if not isinstance(text, str) or not text:
        return text
    if "sk-" in text:
        text = _SK.sub("sk-" + MASK, text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(_bearer, text)
    return text


def redact_text(text: str, secrets: Sequence[str] = ()) -> str:
    """:func:`redact` then :func:`redact_token_shapes`: for messages, ids and other non-model text.

    Args:
        text: any string.
        secrets: the configured secret values.

    Returns:
        The redacted text.
    """
    return redact_token_shapes(redact(text, secrets))


def redact_obj(obj: Any, secrets: Sequence[str], *, shapes: bool = False) -> Any:
    """A copy of a JSON-like value with every string redacted, dictionary keys included.

    Args:
        obj: nested dicts, lists, tuples, strings and scalars (other objects are returned as they are).
        secrets: the configured secret values.
        shapes: also mask token shapes (:func:`redact_token_shapes`).

    Returns:
        The redacted copy (strings without secrets keep their value).
    """
    if isinstance(obj, str):
        return redact_text(obj, secrets) if shapes else redact(obj, secrets)
    if isinstance(obj, dict):
        return {redact_obj(k, secrets, shapes=shapes): redact_obj(v, secrets, shapes=shapes) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v, secrets, shapes=shapes) for v in obj)
    return obj


class Redactor:
    """The redactions of one set of configured secrets, worked out once (a backend's, per reply).

    Each method gives exactly what the function of the same purpose gives with these secrets:
    :meth:`redact` as :func:`redact`, :meth:`model_text` as :func:`redact_model_text`, :meth:`text`
    as :func:`redact_text`, :meth:`obj` as :func:`redact_obj`; only the forms to look for (plain,
    URL-encoded, base64 at each byte offset: :func:`encoded_forms`) are computed here once instead
    of on every call.

    The redacted forms of short strings that recur (finish reasons, usage keys) are remembered.

    Args:
        secrets: the configured secret values (filtered by :func:`known_secrets`).
    """

    _CACHED_LENGTH = 64
    _CACHE_SIZE = 4096

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = known_secrets(secrets)
        self._all = _steps(self.secrets)
        self._model = _steps(tuple(x for x in self.secrets if len(x) >= MIN_MODEL_TEXT_SECRET_LENGTH))
        self._texts: dict[str, str] = {}

    def redact(self, text: str) -> str:
        """:func:`redact` with these secrets."""
        if not self._all or not isinstance(text, str) or not text:
            return text
        return _apply(text, self._all)

    def model_text(self, text: str) -> str:
        """:func:`redact_model_text` with these secrets."""
        if not self._model or not isinstance(text, str) or not text:
            return text
        return _apply(text, self._model)

    def text(self, text: str) -> str:
        """:func:`redact_text` with these secrets."""
        done = self._texts.get(text) if type(text) is str else None
        if done is not None:
            return done
        out = redact_token_shapes(self.redact(text))
        if type(text) is str and len(text) <= self._CACHED_LENGTH and len(self._texts) < self._CACHE_SIZE:
            self._texts[text] = out
        return out

    def obj(self, obj: Any, *, shapes: bool = False) -> Any:
        """:func:`redact_obj` with these secrets."""
        if isinstance(obj, str):
            return self.text(obj) if shapes else self.redact(obj)
        if isinstance(obj, dict):
            return {self.obj(k, shapes=shapes): self.obj(v, shapes=shapes) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.obj(v, shapes=shapes) for v in obj)
        return obj


def _scrub_params(part: str) -> str:
    """A query string (or fragment) with the values of sensitive parameters masked."""
    if not part:
        return part
    out = []
    for item in part.split("&"):
        name, eq, _value = item.partition("=")
        if eq and unquote_plus(name).strip().lower() in SENSITIVE_QUERY_PARAMS:
            item = f"{name}={MASK}"
        out.append(item)
    return "&".join(out)


def _split_url(url: str) -> tuple[str, str, str, str | None, str | None]:
    """``(scheme_and_slashes, authority, path, query, fragment)`` by plain string scanning
    (``None`` for an absent query or fragment)."""
    m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:(?=//)", url)
    head, rest = ("", url) if m is None else (url[: m.end()], url[m.end():])
    authority = ""
    if rest.startswith("//"):
        head += "//"
        rest = rest[2:]
        ends = [i for i in (rest.find(c) for c in "/?#") if i != -1]
        end = min(ends) if ends else len(rest)
        authority, rest = rest[:end], rest[end:]
    fragment: str | None = None
    query: str | None = None
    if "#" in rest:
        rest, _, fragment = rest.partition("#")
    if "?" in rest:
        rest, _, query = rest.partition("?")
    return head, authority, rest, query, fragment


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials inside a URL: the ``user:password@`` password (or a lone ``TOKEN@``) and sensitive query values.

    Args:
        url: a URL (malformed ones allowed) or ``None``.

    Returns:
        :func:`known_secrets` of the password (or of the user name when there is no password: a
        token given as ``https://TOKEN@host``) and of the values of :data:`SENSITIVE_QUERY_PARAMS`
        (raw and percent-decoded).
    """
    if not isinstance(url, str) or not url:
        return ()
    _, authority, _, query, fragment = _split_url(url)
    found: list[str] = []
    if "@" in authority:
        userinfo = authority.rpartition("@")[0]
        user, colon, password = userinfo.partition(":")
        if colon:
            found += [password, unquote(password), unquote_plus(password)]
        else:  # a token given as the user name (https://TOKEN@host/...)
            found += [user, unquote(user)]
    for part in (query, fragment):
        for item in part.split("&") if part else ():
            name, eq, value = item.partition("=")
            if eq and unquote_plus(name).strip().lower() in SENSITIVE_QUERY_PARAMS:
                found += [value, unquote_plus(value)]
    return known_secrets(found)


def redact_url(url: str) -> str:
    """``url`` without credentials; never raises.

    The whole ``user:password@`` part is removed (a token may stand in the user name), values of
    :data:`SENSITIVE_QUERY_PARAMS` in the query and fragment become ``***``, and token shapes are
    masked. Ports are not interpreted (``http://host:abc/v1`` is fine) and malformed URLs are
    scrubbed as far as their text allows.

    Args:
        url: the URL (any string).

    Returns:
        The redacted URL; non-strings are returned unchanged.
    """
    if not isinstance(url, str) or not url:
        return url
    head, authority, path, query, fragment = _split_url(url)
    if "@" in authority:
        authority = authority.rpartition("@")[2]
    out = head + authority + path
    if query is not None:
        out += "?" + _scrub_params(query)
    if fragment is not None:
        out += "#" + _scrub_params(fragment)
    return redact_token_shapes(out)


def redact_command(argv: Sequence[str], secrets: Sequence[str] = ()) -> list[str]:
    """A command line fit to be recorded: secrets, URL credentials and secret flag values masked.

    Args:
        argv: the arguments (e.g. ``sys.argv``).
        secrets: the configured secret values.

    Returns:
        The arguments with configured secrets masked (:func:`redact_text`), every URL inside an
        argument passed through :func:`redact_url`, and the value of ``--api-key``-style flags
        (``--api-key VALUE`` or ``--api-key=VALUE``; also ``--key``, ``--token``, ``--password``,
        ``--secret``) replaced by ``***``. ``--api-key-env NAME`` names a variable and is kept.
    """
    out: list[str] = []
    mask_next = False
    for raw in argv:
        arg = str(raw)
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in _SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                mask_next = True
            continue
        arg = redact(arg, secrets)
        if "://" in arg:
            arg = _URL.sub(lambda m: redact_url(m.group(0)), arg)
        out.append(redact_token_shapes(arg))
    return out
