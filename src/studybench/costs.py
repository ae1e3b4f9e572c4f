"""Token and cost accounting: usage counts, a pricing file, and budgets that stop a job cleanly.

Every model call the toolkit makes (an evaluation turn, an LLM-judge reply, a construction-stage
request) reports a ``usage`` dict as the server sent it. :func:`normalise_usage` reads the four counts
the toolkit accounts in:

- ``prompt_tokens``: input tokens, cached ones included;
- ``completion_tokens``: output tokens, reasoning included (OpenAI's and vLLM's convention);
- ``reasoning_tokens``: the part of the output spent reasoning (``completion_tokens_details``), when
  the server reports it;
- ``cached_tokens``: the part of the input served from the server's prompt cache
  (``prompt_tokens_details``), when the server reports it.

Total tokens are ``prompt_tokens + completion_tokens``: reasoning and cached tokens are parts of those,
never added twice.

**Pricing file** (``--pricing FILE``, JSON, or TOML on Python >= 3.11): prices in a currency per million
tokens, per model::

    {"currency": "USD",
     "models": {"gpt-4.1-mini": {"input": 0.40, "output": 1.60, "cached_input": 0.10},
                "Qwen/*": {"input": 0.0, "output": 0.0},
                "*": {"input": 1.0, "output": 4.0}}}

A model is priced by its exact name, else by the first glob pattern (``fnmatch``, in file order) that
matches it; ``"*"`` catches every model. ``cached_input`` defaults to ``input``. Cost is
``(prompt - cached) * input + cached * cached_input + completion * output``, divided by 10^6. A model
no entry matches has no cost (``None``), and reports say so rather than print zero.

**Budgets** (``--max-cost``, ``--max-total-tokens``): this is the one budgets module. Evaluation,
the LLM judge, test-set construction and reproduction all describe a job's limits as
:class:`BudgetLimits` and open them with :func:`open_budget`, which loads the prices (the file given,
else the ones a run directory recorded in :data:`PRICING_FILE`), checks the limits and returns a
:class:`BudgetTracker`. The tracker adds up what calls spent (starting from what earlier invocations of a
resumed job spent) and says when a limit is reached. Jobs check it before they start new work, so
in-flight calls finish and are kept, and the job stops cleanly (the CLI exits with
:data:`BUDGET_EXIT_CODE`): re-running it with a higher limit resumes where it stopped.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from studybench.files import (
    InputFileError,
    atomic_write_text,
    decode_utf8,
    dumps_json,
    read_json,
    read_user_bytes,
)

__all__ = [
    "BUDGET_EXIT_CODE",
    "MAX_PRICE",
    "NEEDS_PRICES",
    "PRICING_FILE",
    "PRICING_LIMIT",
    "USAGE_FIELDS",
    "BudgetError",
    "BudgetLimits",
    "BudgetTracker",
    "ModelPrice",
    "Pricing",
    "PricingError",
    "TokenCounts",
    "load_pricing",
    "normalise_usage",
    "open_budget",
    "parse_pricing",
    "record_pricing",
    "recorded_pricing",
]

#: The counts :func:`normalise_usage` returns, in this order.
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")

_MAX_COUNT = 2**53

#: The largest price per million tokens a pricing file may give (any real price is far below; a
#: bigger one could only overflow the cost to infinity).
MAX_PRICE = 1e12


class PricingError(ValueError):
    """A pricing file that cannot be read or is malformed; the message names the file and the field."""


def _count(value: Any) -> int | None:
    """A token count, or ``None`` for anything that is not one (a bool, a string, a negative,
    non-finite or absurdly large number: compared as is, never converted first, so a 400-digit
    integer cannot raise ``OverflowError``)."""
    if type(value) is int:  # the common case, decided as below
        return value if 0 <= value < _MAX_COUNT else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 <= value < _MAX_COUNT:  # also false for NaN
        return None
    return int(value)


def normalise_usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The token counts of one reply, from a server's ``usage`` object (flat or with ``*_details``).

    Args:
        usage: the reply's ``usage`` as the server sent it, or as stored in a run (already flat:
            ``reasoning_tokens`` and ``cached_tokens`` at the top level). ``None`` or a non-mapping
            gives an empty dict.

    Returns:
        ``{field: count}`` for each of :data:`USAGE_FIELDS` the server reported; negative, huge,
        non-finite and non-numeric values are dropped, and a part larger than its whole (cached >
        prompt, reasoning > completion) is cut to the whole.
    """
    if not isinstance(usage, Mapping):
        return {}
    out: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
        n = _count(usage.get(name))
        if n is not None:
            out[name] = n
    details = usage.get("completion_tokens_details")
    if "reasoning_tokens" not in out and isinstance(details, Mapping):
        n = _count(details.get("reasoning_tokens"))
        if n is not None:
            out["reasoning_tokens"] = n
    details = usage.get("prompt_tokens_details")
    if "cached_tokens" not in out and isinstance(details, Mapping):
        n = _count(details.get("cached_tokens"))
        if n is not None:
            out["cached_tokens"] = n
    for part, whole in (("cached_tokens", "prompt_tokens"), ("reasoning_tokens", "completion_tokens")):
        if part in out and whole in out:
            out[part] = min(out[part], out[whole])
    return out


@dataclass
class TokenCounts:
    """Summed token counts of many replies.

    Attributes:
        requests: replies counted.
        prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens: sums of the counts the
            replies reported (see the module docstring).
        unreported: replies whose server reported no usable prompt or completion count (their tokens
            are unknown, or known only in part: the part known is counted).
    """

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    unreported: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, usage: Mapping[str, Any] | None) -> None:
        """Count one reply.

        Args:
            usage: its ``usage`` (see :func:`normalise_usage`).
        """
        self.add_counts(normalise_usage(usage))

    def add_counts(self, counts: Mapping[str, int]) -> None:
        """Count one reply whose usage is already :func:`normalise_usage`'s (:meth:`add` without reading it again).

        Args:
            counts: :func:`normalise_usage` of the reply's ``usage``.
        """
        self.requests += 1
        if "prompt_tokens" not in counts or "completion_tokens" not in counts:
            self.unreported += 1
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)

    def merge(self, other: TokenCounts) -> None:
        """Add another sum to this one."""
        for name in ("requests", "unreported", *USAGE_FIELDS):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        """The counts, with ``total_tokens``, as a JSON-ready dict."""
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
            "unreported": self.unreported,
        }

    @classmethod
    def of(cls, usages: Iterable[Mapping[str, Any] | None]) -> TokenCounts:
        """The sum of many replies' ``usage`` dicts."""
        counts = cls()
        for u in usages:
            counts.add(u)
        return counts


@dataclass(frozen=True)
class ModelPrice:
    """Prices per million tokens of one model (or glob pattern).

    Attributes:
        input: per million input tokens not served from the prompt cache.
        output: per million output tokens (reasoning included).
        cached_input: per million cached input tokens (defaults to ``input``).
    """

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, counts: Mapping[str, int] | TokenCounts) -> float:
        """The cost of some token counts at these prices.

        Args:
            counts: a :class:`TokenCounts` or a :func:`normalise_usage` dict.

        Returns:
            The cost in the pricing file's currency.
        """
        get = (lambda k: getattr(counts, k)) if isinstance(counts, TokenCounts) else (lambda k: counts.get(k, 0))
        prompt, cached = get("prompt_tokens"), min(get("cached_tokens"), get("prompt_tokens"))
        cached_price = self.input if self.cached_input is None else self.cached_input
        return ((prompt - cached) * self.input + cached * cached_price + get("completion_tokens") * self.output) / 1e6


@dataclass
class Pricing:
    """A pricing file: per-model prices (see the module docstring).

    Attributes:
        currency: the currency the prices are in (``"USD"`` when the file does not say).
        models: ``{name or glob pattern: ModelPrice}`` in file order.
        source: the file it was read from.
        sha256: the sha256 of that file's bytes (``""`` when not read from a file).
    """

    currency: str = "USD"
    models: dict[str, ModelPrice] = field(default_factory=dict)
    source: str = ""
    sha256: str = ""

    def price(self, model: str | None) -> ModelPrice | None:
        """The prices of ``model``: its exact entry, else the first glob pattern matching it, else ``None``."""
        if model is None:
            return self.models.get("*")
        if model in self.models:
            return self.models[model]
        for pattern, price in self.models.items():
            if fnmatch.fnmatchcase(model, pattern):
                return price
        return None

    def cost(self, model: str | None, counts: Mapping[str, int] | TokenCounts) -> float | None:
        """The cost of ``counts`` spent on ``model``, or ``None`` when the file has no price for it."""
        price = self.price(model)
        return None if price is None else price.cost(counts)

    def to_dict(self) -> dict[str, Any]:
        """The pricing as recorded in reports and manifests."""
        return {
            "currency": self.currency,
            "source": self.source,
            "sha256": self.sha256,
            "models": {
                name: {"input": p.input, "output": p.output, "cached_input": p.input if p.cached_input is None else p.cached_input}
                for name, p in self.models.items()
            },
        }


def _price_field(path: str, name: str, entry: Mapping[str, Any], key: str, required: bool) -> float | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_PRICE:
        try:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        except ValueError:  # an int too long to print
            shown = "a number too large to print"
        limit = f" of at most {MAX_PRICE:.0e}" if isinstance(value, (int, float)) and value > MAX_PRICE else ""
        raise PricingError(f"{path}: models.{name}.{key} must be a non-negative number per million tokens{limit}, "
                           f"got {shown}")
    return float(value)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_pricing(obj: Any, source: str = "pricing") -> Pricing:
    """A :class:`Pricing` from the decoded contents of a pricing file.

    Args:
        obj: the decoded JSON/TOML object.
        source: the file's name, for messages.

    Returns:
        The pricing.

    Raises:
        PricingError: a missing or malformed field (named in the message).
    """
    if not isinstance(obj, Mapping):
        raise PricingError(f"{source}: a pricing file is an object with a 'models' table")
    currency = obj.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip() or not currency.isprintable() or len(currency) > 32:
        raise PricingError(f"{source}: 'currency' must be a non-empty string of at most 32 printable characters")
    models = obj.get("models")
    if not isinstance(models, Mapping) or not models:
        raise PricingError(f"{source}: 'models' must be a non-empty table of model name -> prices")
    prices: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        if not str(name).strip():
            raise PricingError(f"{source}: models: a model name (or glob pattern) is empty")
        if not isinstance(entry, Mapping):
            raise PricingError(f"{source}: models.{name} must be a table with 'input' and 'output'")
        unknown = sorted(set(entry) - {"input", "output", "cached_input"})
        if unknown:
            raise PricingError(f"{source}: models.{name} has unknown field(s) {', '.join(unknown)} "
                               "(expected input, output, cached_input: prices per million tokens)")
        inp = _price_field(source, name, entry, "input", True)
        out = _price_field(source, name, entry, "output", True)
        assert inp is not None and out is not None
        prices[str(name)] = ModelPrice(inp, out, _price_field(source, name, entry, "cached_input", False))
    return Pricing(currency=currency.strip(), models=prices, source=source)


def load_pricing(path: Path | str) -> Pricing:
    """Read a pricing file (JSON; TOML when the name ends in ``.toml``).

    Args:
        path: the file.

    Returns:
        The pricing.

    Raises:
        PricingError: the file cannot be read or decoded, or a field is malformed.
    """
    path = Path(path)
    try:
        data = read_user_bytes(path, limit=PRICING_LIMIT)
        text = decode_utf8(data, path)
    except InputFileError as e:  # names the file
        raise PricingError(f"cannot read pricing file {e}") from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            obj: Any = tomllib.loads(text)
        else:
            obj = json.loads(text, object_pairs_hook=_unique_keys)
    except ImportError:
        raise PricingError(f"{path}: TOML pricing files need Python >= 3.11; use JSON") from None
    except ValueError as e:
        raise PricingError(f"{path}: not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: {e}") from None
    except RecursionError:
        raise PricingError(f"{path}: nested too deeply to be a pricing file") from None
    pricing = parse_pricing(obj, str(path))
    pricing.sha256 = hashlib.sha256(data).hexdigest()
    return pricing


class BudgetTracker:
    """Running token and cost totals against optional limits; thread-safe.

    Args:
        max_cost: stop once the spent cost reaches this (needs ``pricing``).
        max_total_tokens: stop once prompt + completion tokens reach this.
        pricing: prices for the cost; without it cost is not tracked.
        spent: counts already spent by earlier invocations, as ``{model: TokenCounts}``.

    Raises:
        ValueError: ``max_cost`` without ``pricing``, or a negative limit.
    """

    def __init__(
        self,
        *,
        max_cost: float | None = None,
        max_total_tokens: int | None = None,
        pricing: Pricing | None = None,
        spent: Mapping[str, TokenCounts] | None = None,
    ) -> None:
        if max_cost is not None and pricing is None:
            raise ValueError("a cost limit needs a pricing file (--pricing FILE)")
        if (max_cost is not None and not max_cost >= 0) or (max_total_tokens is not None and max_total_tokens < 0):
            raise ValueError("budget limits must be non-negative")
        self.max_cost = max_cost
        self.max_total_tokens = max_total_tokens
        self.pricing = pricing
        self._lock = threading.Lock()
        self.uncounted = 0  # answers of this invocation without a usable usage (see :meth:`charge`)
        self.by_model: dict[str, TokenCounts] = {}
        for model, counts in (spent or {}).items():
            self.by_model.setdefault(model, TokenCounts()).merge(counts)

    def charge(self, model: str | None, usage: Mapping[str, Any] | None, *, answered: bool = True) -> None:
        """Count one reply of ``model``.

        Args:
            model: the model that answered.
            usage: the reply's ``usage``.
            answered: the server answered (not a failed request). An answer without a valid prompt and
                completion count makes :meth:`exceeded` stop a job that has limits: its spend could
                not be counted.
        """
        counts = normalise_usage(usage)
        with self._lock:
            self.by_model.setdefault(model or "", TokenCounts()).add_counts(counts)
            if answered and ("prompt_tokens" not in counts or "completion_tokens" not in counts):
                self.uncounted += 1

    @property
    def total_tokens(self) -> int:
        """Prompt + completion tokens spent, all models."""
        with self._lock:
            return sum(c.total_tokens for c in self.by_model.values())

    @property
    def cost(self) -> float | None:
        """The cost spent so far, or ``None`` without pricing; models the pricing lacks count as 0."""
        if self.pricing is None:
            return None
        with self._lock:
            return sum(self.pricing.cost(m or None, c) or 0.0 for m, c in self.by_model.items())

    def exceeded(self) -> str | None:
        """Why the job must stop (a sentence naming the limit and what was spent), or ``None``.

        A job with limits also stops when the server answered without reporting its token usage:
        the limits could not be kept.
        """
        if self.uncounted and (self.max_total_tokens is not None or self.max_cost is not None):
            flag = "--max-cost" if self.max_cost is not None else "--max-total-tokens"
            return (f"the server answered {self.uncounted} request(s) without reporting token usage, so {flag} "
                    "cannot be kept (stopped rather than spend uncounted)")
        if self.max_total_tokens is not None:
            spent = self.total_tokens
            if spent >= self.max_total_tokens:
                return f"the token budget is spent: {spent:,} tokens >= --max-total-tokens {self.max_total_tokens:,}"
        if self.max_cost is not None:
            cost = self.cost or 0.0
            if cost >= self.max_cost:
                cur = self.pricing.currency if self.pricing else ""
                return f"the cost budget is spent: {cost:.4f} {cur} >= --max-cost {self.max_cost:g}"
        return None


BUDGET_EXIT_CODE = 3
"""Exit status of a command that stopped because ``--max-cost`` or ``--max-total-tokens`` was reached."""

PRICING_FILE = "pricing.json"
"""A run directory's record of the prices its reports use (the parsed pricing file, with its sha256)."""

NEEDS_PRICES = ("a cost limit needs prices: give --pricing FILE (EvalSpec(pricing=...)), "
                "a JSON or TOML file of prices per million tokens")
"""Why a cost limit without prices is refused."""

PRICING_LIMIT = 1 << 20
"""The largest pricing record read back (bytes): as a pricing file a user names (:func:`load_pricing`)."""


class BudgetError(ValueError):
    """Budget settings that cannot be used: an unreadable pricing file, a cost limit without prices.

    Attributes:
        field: the :class:`BudgetLimits` field at fault (``pricing``, ``max_cost`` or ``max_total_tokens``).
    """

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class BudgetLimits(BaseModel):
    """The budgets part of a job's configuration (``--pricing``, ``--max-cost``, ``--max-total-tokens``).

    Neither limit is part of a run's identity: raise it (or drop it) and run the job again to continue.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    pricing: Path | None = None
    """A pricing file (JSON or TOML, see the module docstring): token counts are turned into cost, and a
    run directory records the prices (:data:`PRICING_FILE`) for its later reports."""
    max_cost: float | None = Field(None, ge=0.0, allow_inf_nan=False)
    """Stop the job cleanly once its requests cost this much, in the pricing's currency (needs prices);
    resumable."""
    max_total_tokens: int | None = Field(None, ge=0)
    """Stop the job cleanly once its requests spent this many prompt + completion tokens (what earlier
    invocations of the same job spent counts); resumable."""

    def merge(self, other: BudgetLimits | Mapping[str, Any]) -> BudgetLimits:
        """These limits with every field *set* in ``other`` taking its value (unset fields keep ours).

        Args:
            other: limits (their explicitly set fields count, defaults do not) or a mapping of fields.
        """
        given = dict(other) if isinstance(other, Mapping) else {n: getattr(other, n) for n in other.model_fields_set}
        return BudgetLimits(**{**{n: getattr(self, n) for n in self.model_fields_set}, **given})

    @property
    def limited(self) -> bool:
        """Whether a limit is set (without one a tracker only counts)."""
        return self.max_cost is not None or self.max_total_tokens is not None


def recorded_pricing(run_dir: Path) -> Pricing | None:
    """The pricing recorded in a run directory (:data:`PRICING_FILE`), or ``None`` when there is none.

    Args:
        run_dir: the run directory.

    Returns:
        The pricing, with the source file name and sha256 it was read from.

    Raises:
        ValueError: the record exists but is unreadable or malformed (the message names the file).
    """
    path = Path(run_dir) / PRICING_FILE
    if not os.path.lexists(path):
        return None
    obj = read_json(path, limit=PRICING_LIMIT)  # InputFileError (a ValueError) names the file
    try:
        pricing = parse_pricing(obj, str(path))
    except PricingError as e:
        raise ValueError(str(e)) from None
    pricing.source = str(obj.get("source") or path)
    pricing.sha256 = str(obj.get("sha256") or "")
    return pricing


def record_pricing(run_dir: Path, pricing: Pricing) -> None:
    """Record ``pricing`` in the run directory (:data:`PRICING_FILE`) for its later reports (``OSError``: not written)."""
    record = pricing.to_dict()
    atomic_write_text(Path(run_dir) / PRICING_FILE, dumps_json(record) + "\n")


def open_budget(limits: BudgetLimits, *, spent: Mapping[str, TokenCounts] | None = None,
                run_dir: Path | None = None, pricing: Pricing | None = None) -> BudgetTracker:
    """The tracker of a job's limits: its prices loaded, its limits checked, what it spent counted.

    Args:
        limits: the job's budget settings.
        spent: what earlier invocations of the same job spent, per model.
        run_dir: a run directory whose recorded prices (:data:`PRICING_FILE`) apply when
            ``limits.pricing`` is not given.
        pricing: prices already loaded (then neither the file nor the record is read).

    Returns:
        The tracker (``tracker.pricing``: the prices, or ``None``); without limits it only counts.

    Raises:
        BudgetError: an unreadable or malformed pricing file or record (field ``pricing``), a cost limit
            without prices (``max_cost``), or a negative limit.
    """
    try:
        if pricing is None and limits.pricing is not None:
            pricing = load_pricing(limits.pricing)
        elif pricing is None and run_dir is not None:
            pricing = recorded_pricing(run_dir)
    except (PricingError, ValueError) as e:
        raise BudgetError(str(e), "pricing") from None
    if limits.max_cost is not None and pricing is None:
        raise BudgetError(NEEDS_PRICES, "max_cost")
    if limits.max_cost is not None and not limits.max_cost >= 0:
        raise BudgetError(f"must be >= 0, got {limits.max_cost}", "max_cost")
    if limits.max_total_tokens is not None and limits.max_total_tokens < 0:
        raise BudgetError(f"must be >= 0, got {limits.max_total_tokens}", "max_total_tokens")
    return BudgetTracker(max_cost=limits.max_cost, max_total_tokens=limits.max_total_tokens, pricing=pricing, spent=spent)
