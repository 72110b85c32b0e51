"""Citations in answers: the model's ``[n]`` markers expanded to ``[path:first-last]`` (also while
streaming), the answer as saved, and the excerpts it cites."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fastrag.answering.cleanup import clean_answer
from fastrag.answering.prompt import EMPTY_ANSWER, Excerpt
from fastrag.schemas import CITATION

_MARKER = re.compile(r"\[\s*(\d{1,2}(?:\s*,\s*\d{1,2})*)\s*\]")
_OPEN_MARKER = re.compile(r"\[[\d,\s]*")


def citations(answer: str) -> list[tuple[str, int, int]]:
    """The ``[path:first-last]`` citations found in an answer."""
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in CITATION.finditer(answer)]


def _expand(numbers: str, excerpts: Sequence[Excerpt]) -> str:
    cited = [int(n) for n in re.findall(r"\d+", numbers)]
    return "".join(excerpts[n - 1].citation for n in dict.fromkeys(cited) if 1 <= n <= len(excerpts))


def expand_citations(answer: str, excerpts: Sequence[Excerpt]) -> str:
    """Replace the model's ``[1]``, ``[1, 3]`` markers by ``[path:first-last]`` (unknown numbers are dropped)."""
    return _MARKER.sub(lambda m: _expand(m.group(1), excerpts), answer)


class CitationStream:
    """Streaming :func:`expand_citations`: text that may be the start of a ``[n]`` marker is held back."""

    HOLD = 16

    def __init__(self, excerpts: Sequence[Excerpt]) -> None:
        self._excerpts = excerpts
        self._pending = ""

    def feed(self, chunk: str) -> str:
        """Return the printable part of ``chunk`` with complete markers expanded."""
        self._pending += chunk
        at = self._pending.rfind("[")
        if at >= 0 and _OPEN_MARKER.fullmatch(self._pending[at:]) and len(self._pending) - at <= self.HOLD:
            ready, self._pending = self._pending[:at], self._pending[at:]
        else:
            ready, self._pending = self._pending, ""
        return expand_citations(ready, self._excerpts)

    def flush(self) -> str:
        """Whatever is still held back."""
        tail, self._pending = self._pending, ""
        return expand_citations(tail, self._excerpts)


def finish_answer(answer: str, excerpts: Sequence[Excerpt], max_listed: int = 3) -> str:
    """The answer as saved: markers expanded, trimmed, never empty, citing at least one source it was shown.

    When the model cited none of the excerpts, their citations are appended as a ``Sources:`` line
    (the best ``max_listed``), so every answer points at its evidence.
    """
    text = clean_answer(expand_citations(answer, excerpts)) or EMPTY_ANSWER
    if excerpts and not cited_excerpts(text, excerpts):
        text += "\n\nSources: " + ", ".join(e.citation for e in excerpts[:max_listed])
    return text


def cited_excerpts(answer: str, excerpts: Sequence[Excerpt]) -> list[Excerpt]:
    """What an (expanded) answer cites of the excerpts shown, one per cited range, in the answer's order.

    A citation counts when its range lies inside a range shown (a whole excerpt's range, or a quoted line
    of it); it is returned as the excerpt cut to that range, so its :attr:`~Excerpt.citation` is the one
    in the answer.
    """
    out: list[Excerpt] = []
    for path, first, last in dict.fromkeys(citations(answer)):
        for e in excerpts:
            if e.shows(path, first, last):
                whole = e.shown == ((first, last),)
                out.append(e if whole else Excerpt(e.source, first, last, "", ((first, last),)))
                break
    return out


def cited_or_shown(answer: str, excerpts: Sequence[Excerpt]) -> list[Excerpt]:
    """The excerpts an answer cites, or all the excerpts shown when it cites none by itself."""
    return cited_excerpts(answer, excerpts) or list(excerpts)
