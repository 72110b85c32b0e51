"""Whether a sentence is supported by the text of the spans it cites: the check every shown sentence passes.

An answer's text is cut into *units* (:func:`units`): a fenced code block whole; otherwise each line
(list and heading marks set aside) cut into sentences. A unit is judged against the text of the source
ranges that support it (its *evidence*) by :func:`judge`, which gives the reason to drop it, or ``None``:

- ``empty code block``: a fenced block with no line of code (blank, or comments only: a placeholder);
- ``invented link``: a link, image or URL whose target the evidence does not contain;
- ``truncated``: a sentence that does not end as one ends (``.``, ``!``, ``?``, ``:``, a closing quote,
  bracket or backtick, a marked elision ``…``), unless it is a whole line of its evidence (a quoted list
  item, a table row, a code line); a code block never closed;
- ``unsupported``: its :func:`support` is below :data:`SUPPORT_THRESHOLD`.

:func:`support` is 1.0 for a unit quoted word for word from its evidence; otherwise the smaller of
two shares: of the unit's content words
(:func:`~fastrag.evaluation.answer_metrics.content_words`) that are content words of the evidence, and
of its key terms (identifiers, numbers, flags, quoted terms, names:
:func:`~fastrag.evaluation.answer_metrics.key_terms`) that the evidence contains. Words and terms of the
question are left out of both shares: what a sentence says beyond the question must come from the
sources, and one that only echoes the question is not supported.

:func:`audit` runs the same check on a saved answer, independently of how it was made: each shown unit
against the ranges it cites (a unit without a citation of its own takes its line's), read from the files.
``evaluate_answers`` reports its counts (support rate, invented links, truncated sentences, empty code
blocks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

from fastrag.evaluation.answer_metrics import contains, content_words, key_terms
from fastrag.schemas import CITATION

#: Least :func:`support` of a kept unit (chosen out of fold: benches/RESULTS.md "Grounded answers").
SUPPORT_THRESHOLD = 1.0
#: Reasons a unit is dropped, in the order :func:`judge` tests them (then ``repetition``, ``introduces
#: nothing``, tested by the grounding on the whole answer).
REASONS = ("empty code block", "invented link", "truncated", "unsupported", "repetition", "introduces nothing")

_FENCE = "```"
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_HEADING_MARK = re.compile(r"^\s*#{1,6}\s+")
_QUOTE_MARK = re.compile(r"^\s*>\s?")
#: A sentence ends at ``.``, ``!`` or ``?`` (citations after it stay with it) before a blank and a capital,
#: a backtick, a quote or a bracket.
_SENTENCE_END = re.compile(r"[.!?](?:\s*" + CITATION.pattern + r")*(?=\s+(?!" + CITATION.pattern + r")[A-Z`\"'(*\[])")
_CITED = re.compile(r"\s*" + CITATION.pattern)
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?[^)]*\)")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]`\"']+")
#: A line of a code block that is a comment (``--`` only before a blank: ``--flag`` is code).
COMMENT = re.compile(r"^\s*(?:#|//|--(?:\s|$)|/\*|\*|<!--|;)")
#: How a finished sentence may end (after its citations are set aside).
_FINISHED = tuple(".!?:;)\"'`*]…")
ELLIPSIS = "…"

#: The content words of an evidence text, kept for the next unit judged against the same excerpt.
_evidence_words = lru_cache(maxsize=256)(content_words)

#: The text of the cited ranges ``(path, first, last)``: read from the files.
RangeText = Callable[[str, int, int], str]


@dataclass(frozen=True, slots=True)
class Unit:
    """A sentence, list item or code block of an answer, with the citations written in it."""

    text: str
    code: bool = False
    #: ``(path, first, last)`` of the citations in the unit (or, in :func:`audit`, of its line).
    cited: tuple[tuple[str, int, int], ...] = ()
    #: The unit's code block was never closed (generation stopped inside it).
    unclosed: bool = False

    @property
    def bare(self) -> str:
        """The unit without its citations and marks."""
        return _CITED.sub("", self.text).strip()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What was decided about a unit: ``reason`` it was dropped (``None``: kept) and its support."""

    unit: Unit
    reason: str | None
    support: float


def _citations(text: str) -> tuple[tuple[str, int, int], ...]:
    return tuple((m.group(1), int(m.group(2)), int(m.group(3))) for m in CITATION.finditer(text))


def sentences(line: str) -> list[str]:
    """The sentences of one line of prose (citations after a sentence's end stay with it)."""
    cuts = [0, *(m.end() for m in _SENTENCE_END.finditer(line)), len(line)]
    found: list[str] = []
    for piece in (line[a:b].strip() for a, b in pairwise(cuts)):
        if found and not any(c.isalnum() for c in CITATION.sub("", piece)):  # citations, marks: the one before
            found[-1] = f"{found[-1]} {piece}"
        elif piece:
            found.append(piece)
    return found


def units(text: str, line_citations: bool = False) -> list[Unit]:
    """The units of ``text``: each fenced code block whole, each sentence of every other line.

    With ``line_citations`` a unit citing nothing takes the citations of its line, and a line holding
    only citations right after a code block is that block's (as :func:`render` writes them).
    """
    found: list[Unit] = []
    block: list[str] | None = None
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if block is not None:
            block.append(raw_line)
            if line.startswith(_FENCE):
                found.append(Unit("\n".join(block), code=True))
                block = None
            continue
        if line.startswith(_FENCE):
            block = [raw_line]
            continue
        if not line:
            continue
        cited = _citations(line)
        if line_citations and found and found[-1].code and cited and not CITATION.sub("", line).strip():
            found[-1] = Unit(found[-1].text, True, cited)
            continue
        body = _HEADING_MARK.sub("", _LIST_MARK.sub("", _QUOTE_MARK.sub("", line)))
        for sentence in sentences(body):
            own = _citations(sentence)
            found.append(Unit(sentence, cited=own or (cited if line_citations else ())))
    if block is not None:
        found.append(Unit("\n".join(block), code=True, unclosed=True))
    return found


def code_lines(block: str) -> list[str]:
    """The lines of a fenced block that hold code: not the fences, not blank, not comments."""
    inner = block.splitlines()[1:]
    if inner and inner[-1].strip().startswith(_FENCE):
        inner = inner[:-1]
    return [line for line in inner if line.strip() and not COMMENT.match(line)]


def links(text: str) -> list[str]:
    """The targets of the links, images and URLs of ``text``."""
    targets = [m.group(1) for m in _LINK.finditer(text)]
    return targets + [m.group(0).rstrip(".,;:") for m in _URL.finditer(_LINK.sub("", text))]


def quoted_from(text: str, evidence: str) -> bool:
    """Whether ``text`` (less a final :data:`ELLIPSIS`) is in ``evidence`` word for word, blanks aside."""
    body = " ".join(text.rstrip().removesuffix(ELLIPSIS).split())
    return any(c.isalnum() for c in body) and body in " ".join(evidence.split())


def support(text: str, evidence: str, question: str = "") -> float:
    """1.0 for a text quoted from ``evidence`` (:func:`quoted_from`); else min(share of ``text``'s content
    words among ``evidence``'s, share of its key terms ``evidence`` contains), both leaving out what the
    ``question`` holds; 0.0 when nothing is left (a text that only echoes the question says nothing)."""
    if quoted_from(text, evidence):
        return 1.0
    words = content_words(text) - content_words(question)
    if not words:
        return 0.0
    word_share = len(words & _evidence_words(evidence)) / len(words)
    asked = question.lower()
    terms = {t for t in key_terms(text) if not contains(asked, t)}
    lowered = evidence.lower()
    term_share = sum(contains(lowered, t) for t in terms) / len(terms) if terms else 1.0
    return min(word_share, term_share)


def finished(text: str) -> bool:
    """Whether a sentence's text (citations set aside) ends as a sentence ends."""
    return text.rstrip().endswith(_FINISHED)


def judge(
    unit: Unit, evidence: str, threshold: float = SUPPORT_THRESHOLD, whole_line: bool = False, question: str = ""
) -> Verdict:
    """Why ``unit`` is not shown against ``evidence`` (module docstring), or ``None``, and its support
    (:func:`support`, beyond ``question``).

    ``whole_line``: the unit is a whole line of its evidence (a quoted line), so it needs no final stop.
    """
    body = "\n".join(code_lines(unit.text)) if unit.code else unit.bare
    score = support(body, evidence, question)
    lowered = evidence.lower()
    if unit.code and not body.strip():
        return Verdict(unit, "empty code block", score)
    if any(target.lower() not in lowered for target in links(body)):
        return Verdict(unit, "invented link", score)
    if unit.unclosed or (not unit.code and not whole_line and not finished(unit.bare)):
        return Verdict(unit, "truncated", score)
    if score < threshold:
        return Verdict(unit, "unsupported", score)
    return Verdict(unit, None, score)


# ----------------------------------------------------------------------------- audit of a saved answer


@dataclass(slots=True)
class Audit:
    """The check of :func:`audit` on one or more saved answers: counts of shown units."""

    units: int = 0
    supported: int = 0
    invented_links: int = 0
    truncated: int = 0
    empty_code_blocks: int = 0
    #: Answers with at least one unit of each kind counted above (``invented link``, ...).
    answers_with: dict[str, int] = field(default_factory=dict)

    @property
    def support_rate(self) -> float:
        """Share of shown units supported by the ranges they cite (1.0 when nothing is shown)."""
        return self.supported / self.units if self.units else 1.0

    def add(self, other: Audit) -> None:
        """Add the counts of ``other`` to these."""
        self.units += other.units
        self.supported += other.supported
        self.invented_links += other.invented_links
        self.truncated += other.truncated
        self.empty_code_blocks += other.empty_code_blocks
        for kind, n in other.answers_with.items():
            self.answers_with[kind] = self.answers_with.get(kind, 0) + n


def _claims(answer: str, notices: Iterable[str]) -> str:
    """The lines of a saved answer that claim something: not its ``Sources:`` line nor one of ``notices``."""
    skipped = {n.strip() for n in notices}
    kept = []
    for line in answer.splitlines():
        stripped = line.strip()
        if stripped.startswith("Sources: [") or stripped in skipped:
            continue
        kept.append(line)
    return "\n".join(kept)


def audit(
    answer: str,
    range_text: RangeText,
    notices: Sequence[str] = (),
    question: str = "",
    threshold: float = SUPPORT_THRESHOLD,
) -> Audit:
    """The check of :func:`judge` on every unit a saved answer to ``question`` shows, against the ranges it cites.

    A unit citing nothing, or only ranges that cannot be read, is unsupported (and still checked for
    links, truncation and empty code blocks against no evidence). ``notices`` are lines that
    claim nothing about the code base (headers, fixed answers) and are skipped.
    """
    result = Audit()
    for unit in units(_claims(answer, notices), line_citations=True):
        texts: list[str] = []
        for path, first, last in unit.cited:
            try:
                texts.append(range_text(path, first, last))
            except (OSError, ValueError):
                continue
        evidence = "\n".join(texts)
        whole = any(unit.bare.rstrip(ELLIPSIS).strip() == t.strip() or _ends_line(unit.bare, t) for t in texts)
        verdict = judge(unit, evidence, threshold, whole, question)
        if not texts and verdict.reason is None:  # nothing cited (or readable): nothing supports it
            verdict = Verdict(unit, "unsupported", 0.0)
        result.units += 1
        result.supported += verdict.reason is None
        kind = verdict.reason
        if kind == "invented link":
            result.invented_links += 1
        elif kind == "truncated":
            result.truncated += 1
        elif kind == "empty code block":
            result.empty_code_blocks += 1
    for kind, count in (
        ("invented link", result.invented_links),
        ("truncated", result.truncated),
        ("empty code block", result.empty_code_blocks),
    ):
        result.answers_with[kind] = int(count > 0)
    return result


def _ends_line(text: str, evidence: str) -> bool:
    """Whether ``text`` is the end of a line of ``evidence`` (a quoted line that ends where its line does)."""
    body = text.strip()
    return bool(body) and any(line.rstrip().endswith(body) for line in evidence.splitlines())
