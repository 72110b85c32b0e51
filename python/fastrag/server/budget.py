"""Token budgets of the MCP tools: a response trimmed to ``max_tokens``, saying what was left out.

Tokens are estimated from the response's JSON: :data:`CHARS_PER_TOKEN` characters a token, fewer than a
code tokenizer averages, so the estimate errs on the long side. Whole results go first (the last ones:
results are best first, or in file order); when even the first result alone is too long, the lines of
its text fields are cut from the end. The response then carries ``omitted``: how many results and lines
were left out, and how to get them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastrag.arguments import int_arg

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS",
    "MIN_TOKENS",
    "budgeted",
    "estimate",
    "fit",
    "max_tokens_arg",
]

#: Characters counted as one token (code averages 3 to 4 with common tokenizers).
CHARS_PER_TOKEN = 3
#: The budget of a response unless the call says otherwise.
DEFAULT_MAX_TOKENS = 2000
#: The smallest and largest budgets a call may ask for.
MIN_TOKENS = 100
MAX_TOKENS = 100_000
#: Most lines of one result looked at when cutting it.
LINES_SEARCHED = 1 << 20
#: Fields whose text may be cut line by line.
TEXT_FIELDS = ("text", "snippet", "signature", "code", "comment", "string", "lines", "matches")


def max_tokens_arg(value: Any) -> int:
    """A ``max_tokens`` argument (:data:`MIN_TOKENS`..:data:`MAX_TOKENS`)."""
    return int_arg("max_tokens", value, MIN_TOKENS, MAX_TOKENS, prefix="")


def estimate(payload: Any) -> int:
    """The tokens ``payload`` is counted as: its compact JSON's length over :data:`CHARS_PER_TOKEN`, rounded up."""
    return -(-len(json.dumps(payload, ensure_ascii=False, separators=(",", ":"))) // CHARS_PER_TOKEN)


def _cut_lines(item: Any, keep: int) -> tuple[Any, int]:
    """``item`` with at most ``keep`` lines in each text field (and list of lines); the lines cut."""
    if isinstance(item, str):
        lines = item.split("\n")
        return "\n".join(lines[:keep]), max(0, len(lines) - keep)
    if isinstance(item, list):
        if all(isinstance(x, dict) for x in item):
            return item[:keep], max(0, len(item) - keep)
        return item, 0
    if not isinstance(item, dict):
        return item, 0
    out = dict(item)
    cut = 0
    for key in TEXT_FIELDS:
        if key in out:
            out[key], n = _cut_lines(out[key], keep)
            cut += n
    return out, cut


def _most(fits: Callable[[int], bool], high: int) -> int:
    """The largest ``n`` in ``0..high`` with ``fits(n)`` (``fits`` true up to some point, then false); 0 if none."""
    lo, hi = 0, high
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit(payload: dict[str, Any], key: str | None, max_tokens: int, hint: str = "") -> dict[str, Any]:
    """``payload`` trimmed to ``max_tokens``: whole items of the list ``payload[key]`` from the end first
    (``key`` ``None``: the payload is one result), then lines of the first remaining result's text fields.

    Adds ``omitted`` (``results``, ``lines``, ``note``) when anything was left out; ``hint`` says how to
    see it (a narrower filter, a larger ``max_tokens``, ``read_span``).
    """
    if estimate(payload) <= max_tokens:
        return payload
    note: dict[str, Any] = {"results": 0, "lines": 0, "note": f"trimmed to max_tokens={max_tokens}"}
    if hint:
        note["note"] += f"; {hint}"
    items = payload.get(key) if key is not None else None
    if key is not None and isinstance(items, list) and items:
        listed: list[Any] = items
        kept = _most(lambda n: estimate({**payload, key: listed[:n], "omitted": note}) <= max_tokens, len(listed))
        note["results"] = len(listed) - max(kept, 1)
        if kept >= 1:
            return {**payload, key: listed[:kept], "omitted": note}

        def cut(lines: int) -> tuple[dict[str, Any], int]:
            trimmed, n = _cut_lines(listed[0], lines)
            return {**payload, key: [trimmed], "omitted": note}, n
    else:

        def cut(lines: int) -> tuple[dict[str, Any], int]:
            trimmed, n = _cut_lines(payload, lines)
            return {**trimmed, "omitted": note}, n

    note["lines"] = LINES_SEARCHED  # as wide as any count written below: the estimate stays an upper bound
    lines = _most(lambda n: estimate(cut(n)[0]) <= max_tokens, LINES_SEARCHED)
    shown, note["lines"] = cut(lines)
    return shown


def budgeted(work: Callable[[], dict[str, Any]], key: str | None, max_tokens: Any, hint: str = "") -> dict[str, Any]:
    """``work()``'s response fitted to ``max_tokens`` (checked before the work starts)."""
    budget = max_tokens_arg(max_tokens)
    return fit(work(), key, budget, hint)
