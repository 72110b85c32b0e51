"""Cleaning what a model writes: ``<think>`` blocks (also while streaming), repetition loops, echoed questions."""

from __future__ import annotations

import re
from collections.abc import Sequence

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def strip_think(text: str) -> str:
    """Remove reasoning blocks (``<think>…</think>``, also an unclosed one) and stray markers."""
    return _THINK_BLOCK.sub("", text).replace("</think>", "").strip()


class ThinkFilter:
    """Streaming counterpart of :func:`strip_think`: feed chunks, get only the text outside ``<think>`` blocks.

    A chunk that may be the start of a marker is held back until the next chunk decides it.
    """

    OPEN = "<think>"
    CLOSE = "</think>"

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False
        self._started = False

    def feed(self, chunk: str) -> str:
        """Return the printable part of ``chunk`` (possibly empty)."""
        self._pending += chunk
        out: list[str] = []
        while True:
            marker = self.CLOSE if self._inside else self.OPEN
            at = self._pending.find(marker)
            if at >= 0:
                if not self._inside:
                    out.append(self._pending[:at])
                self._pending = self._pending[at + len(marker) :]
                self._inside = not self._inside
                continue
            if not self._inside and self.CLOSE in self._pending:  # a stray closing marker
                self._pending = self._pending.replace(self.CLOSE, "")
                continue
            keep = _partial_suffix(self._pending, (self.OPEN, self.CLOSE))
            if not self._inside:
                out.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        text = "".join(out)
        if not self._started:  # no leading blank lines (Qwen3 answers after "</think>\n\n")
            text = text.lstrip()
            self._started = bool(text)
        return text

    def flush(self) -> str:
        """The held-back tail once generation has ended."""
        tail, self._pending = ("" if self._inside else self._pending), ""
        return tail if self._started else tail.lstrip()


def _partial_suffix(text: str, markers: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:n]):
                best = max(best, n)
                break
    return best


class LoopGuard:
    """Detects a small model's repetition loop, line by line: a non-blank line seen before, or an empty code block.

    Code fences may repeat (a block opens and closes) but a fence right after a fence is a loop.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._previous = ""
        self._line = ""

    def line_is_loop(self, line: str) -> bool:
        """Record one complete line; whether it repeats."""
        key = line.strip()
        if not key:
            return False
        fence = key.startswith("```")
        looped = (fence and self._previous.startswith("```")) or (not fence and key in self._seen)
        if not fence:
            self._seen.add(key)
        self._previous = key
        return looped

    def feed(self, chunk: str) -> bool:
        """Record streamed text; whether a line completed in it repeats."""
        self._line += chunk
        *complete, self._line = self._line.split("\n")
        return any(self.line_is_loop(line) for line in complete)


def answer_loops(text: str) -> bool:
    """Whether the complete lines of a partial answer already contain a repetition loop.

    Lines are judged as :func:`clean_answer` judges them (echoed ``Question:`` lines are
    skipped), so a generation stopped here is saved exactly as the finished one would have been.
    """
    guard = LoopGuard()
    complete = text.split("\n")[:-1]
    return any(guard.line_is_loop(line) for line in complete if not line.strip().lower().startswith("question:"))


def clean_answer(answer: str) -> str:
    """Trim what small models add around an answer: echoed ``Question:`` lines and repetition loops.

    Lines starting with ``Question:`` are dropped, and the text is cut at the first line that
    :class:`LoopGuard` calls a loop (greedy decoding of a small model can repeat
    itself until ``max_new_tokens``). A code block left open is closed.
    """
    guard = LoopGuard()
    kept: list[str] = []
    for line in answer.splitlines():
        if line.strip().lower().startswith("question:"):
            continue
        if guard.line_is_loop(line):
            break
        kept.append(line.rstrip())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    if text.count("```") % 2:  # cut inside a code block: close it
        text += "\n```"
    return text
