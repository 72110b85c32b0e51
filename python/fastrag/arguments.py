"""Checking user-supplied arguments: one set of rules for the command line and the HTTP API.

The CLI receives raw Python values from Fire; the API receives JSON values, form fields and query
strings (always text). Both end up here, so ``k``, modes, free text and paths are accepted and
rejected the same way. Every failure is a :class:`~fastrag.errors.UsageError` naming the argument;
``prefix`` is how the argument is spelled in the message (``--k`` on the command line, ``k`` in the API).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastrag.config import MODES
from fastrag.errors import UsageError

#: Smallest ``max_chunk_size`` accepted: below it chunks stop carrying meaning.
MIN_CHUNK_SIZE = 50

_INTEGER_TEXT = re.compile(r"[+-]?\d{1,18}")
#: A lone surrogate: text JSON can spell (``"\ud800"``) and Python reads from undecodable command-line
#: bytes, but UTF-8 cannot carry (writing or encoding it fails).
_SURROGATE = re.compile("[\ud800-\udfff]")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def replace_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (dictionary keys, list items, nested) replaced by
    U+FFFD: what every boundary where text enters (command line, dataset files, HTTP, MCP) does, so that
    no later print, file write or tokenizer meets text it cannot encode."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [replace_surrogates(v) for v in value]
    return value


def int_arg(name: str, value: Any, low: int, high: int, *, prefix: str = "--") -> int:
    """Check that ``value`` is an integer in ``[low, high]`` (an integral float is accepted)."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and low <= value <= high:
            return int(value)
        raise UsageError(f"{prefix}{name} must be an integer between {low} and {high}, got {value!r}")
    if not low <= value <= high:
        raise UsageError(f"{prefix}{name} must be between {low} and {high}, got {value}")
    return value


def text_arg(name: str, value: Any, max_chars: int | None = None) -> str:
    """A free-text argument, not blank; scalars become text (Fire turns ``"42"`` into an int).

    ``max_chars`` bounds its length when given.
    """
    if value is None or isinstance(value, (dict, list, tuple, set)):
        raise UsageError(f"{name} must be text, got {value!r}")
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        raise UsageError(f"{name} is empty")
    if max_chars is not None and len(text) > max_chars:
        raise UsageError(f"{name} is too long: {len(text)} characters, at most {max_chars}")
    return text


def path_arg(name: str, value: Any, *, prefix: str = "--") -> Path:
    """A path argument (not checked for existence; see :mod:`fastrag.server.safety` for confinement)."""
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise UsageError(f"{prefix}{name} needs a path, got {value!r}")
    if isinstance(value, (dict, list, tuple, set)):
        raise UsageError(f"{prefix}{name} must be a path, got {value!r}")
    return Path(str(value))


def mode_arg(value: Any, *, prefix: str = "--") -> str:
    """A search mode: lexical, vector or hybrid."""
    if value not in MODES:
        raise UsageError(f"{prefix}mode must be one of {', '.join(MODES)}, got {value!r}")
    return str(value)


def bool_arg(name: str, value: Any, *, prefix: str = "--") -> bool:
    """A yes/no argument: a boolean, or ``1/0``, ``true/false``, ``yes/no``, ``on/off`` as text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise UsageError(f"{prefix}{name} must be true or false, got {value!r}")


def integer_text(value: Any) -> Any:
    """``value`` as an ``int`` when it is the text of an integer (form fields and query strings), else as is."""
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    return value
