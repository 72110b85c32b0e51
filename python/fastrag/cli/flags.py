"""Flags of the command line: repeated flags, raw text arguments, one-line errors and statuses."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fire.decorators import SetParseFn

from fastrag.errors import UsageError, as_invoked

if TYPE_CHECKING:
    from fastrag.answering.support import Verdict

CommandT = TypeVar("CommandT", bound=Callable[..., None])


def raw_text(*names: str) -> Callable[[CommandT], CommandT]:
    """Have Fire pass the named arguments as the text typed (no literal evaluation of "42",
    "[1]", or a 100 KB query that its parser chokes on)."""

    def decorate(command: CommandT) -> CommandT:
        decorated: CommandT = SetParseFn(str, *names)(command)
        return decorated

    return decorate


def status(message: str) -> None:
    """One line on stderr; a command it suggests is spelled as the user started this one (:func:`as_invoked`)."""
    print(as_invoked(message), file=sys.stderr)


def dropped_count(dropped: Sequence[Verdict]) -> None:
    """One stderr line counting the sentences of the model's text not shown, by reason (none: no line)."""
    if dropped:
        reasons = ", ".join(f"{why}: {n}" for why, n in Counter(str(v.reason) for v in dropped).most_common())
        status(f"fastrag: {len(dropped)} sentences of the model's text not shown ({reasons})")


def dropped_list(dropped: Sequence[Verdict], prefix: str = "") -> None:
    """Each sentence of the model's text not shown, on one stderr line with why (``--show_dropped``)."""
    for verdict in dropped:
        text = " ".join(verdict.unit.bare.split())
        status(f"  {prefix}{verdict.reason} (support {verdict.support:.2f}): {text}")


def repo_names(value: Any, index_dir: Path) -> tuple[str, ...]:
    """``--repo`` as shard names: absent, or one or more (the flag repeated, or comma-separated); a bare
    ``--repo`` or an empty name is an error naming the shards of ``index_dir``."""
    if value is None:
        return ()
    names = [n.strip() for n in str(value).replace(REPEATED_SEP, ",").split(",")]
    if isinstance(value, bool) or not all(names):
        from fastrag.indexing.catalog import shard_names

        raise UsageError(f"--repo needs a shard name ({shard_names(index_dir)})")
    return tuple(names)


def globs(value: Any) -> Any:
    """The globs of ``--path`` (several when it was repeated)."""
    if isinstance(value, str) and REPEATED_SEP in value:
        return value.split(REPEATED_SEP)
    return value


def host_names(value: Any) -> tuple[str, ...]:
    """``--allowed_host`` as host names: absent, or one or more (the flag repeated); a bare flag or an
    empty name is an error."""
    if value is None:
        return ()
    hosts = tuple(h.strip() for h in str(value).split(REPEATED_SEP))
    if isinstance(value, bool) or not all(hosts):
        raise UsageError(f"--allowed_host has an empty name: {value!r}")
    return hosts


def target_size(max_chunk_size: int) -> int:
    from fastrag.config import CHUNK_TARGET_SIZE

    return min(CHUNK_TARGET_SIZE, max_chunk_size)


def fire_error(component_trace: Any) -> None:
    """Replace Fire's multi-line usage dump with one line."""
    message = component_trace.elements[-1].ErrorAsStr() if component_trace.elements else "bad arguments"
    status(f"fastrag: error: {message} (see `fastrag --help`)")


#: Flags that may be given more than once; their values reach the command joined by ``REPEATED_SEP``
#: (:mod:`fastrag.cli.argv`), which a value may not contain.
REPEATED_FLAGS = ("--allowed_host", "--path", "--repo")
REPEATED_SEP = "\n"
