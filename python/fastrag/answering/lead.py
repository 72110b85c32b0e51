"""The lead of an answer: whole units of the retrieved spans, chosen by a learned ranking against the question.

The candidate units of the shown excerpts (:func:`candidates`) are whole: a sentence of prose (a
Markdown paragraph's lines joined), a list item's sentence, a table row, a fenced code block, or, in a
source file, a statement (its lines up to balanced brackets). A sentence ending with ``:`` that
introduces a code block carries the block; one that introduces nothing else is not a candidate, nor is a
block left open by the end of the excerpt, nor a sentence with an unclosed code span.

Each unit gets the features of :func:`features` (idf-weighted overlap with the question, what the
question asks for — a command, a value, a version, a procedure — and whether the unit holds it, its
position, the span's rank, its length); its score is their dot product with the weights of
:data:`WEIGHTS_FILE`, fitted out of fold on the reference answers of the public and dev sets
(``benches/answer_lead.py``, which writes the file). The lead is the best units, best first, while
they fit in the file's word budget (the best one always), each with the citation of its exact range.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Literal

from fastrag import _core
from fastrag.answering.prompt import Excerpt, SpanReader, cite, shown_texts
from fastrag.answering.support import COMMENT, finished, sentences
from fastrag.errors import UserError
from fastrag.evaluation.answer_metrics import contains, key_terms
from fastrag.retrieval.retriever import clean_query

#: The fitted weights and word budget (written by ``benches/answer_lead.py``).
WEIGHTS_FILE = Path(__file__).with_name("lead_weights.json")
#: Files read as prose; every other file is read as source code.
PROSE_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ""})
#: Longest code block or statement taken whole, in lines (a longer one would bury the answer).
MAX_CODE_LINES = 12
#: Longest statement of a source file, in lines, before its brackets must have closed.
MAX_STATEMENT_LINES = 8
#: A unit sharing more than this share of its tokens with a better chosen one is not added.
NEAR_DUPLICATE = 0.6

Kind = Literal["sentence", "row", "code", "intro"]

_FENCE = "```"
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|=+\s*$|-+\s*$)")
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
#: Markup of the docs' site that says nothing to a reader: snippet includes and anchors.
_MARKUP = re.compile(r"^\s*(?:--8<--|\[\]\(\)\{)")
_COMMAND = re.compile(
    r"(?:^|\n|`|\$ )\s*(?:vllm|pip3?|python3?|docker|uv|git|curl|export|bash|make|torchrun|huggingface-cli"
    r"|kubectl|helm|conda|nsys|lm_eval|ray|sudo)\b"
)
_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]+")
_VALUE = re.compile(r"(?<![\w.])\d+(?:\.\d+)*\b|=\s*\S|\b(?:True|False|None|default)\b")
_VERSION = re.compile(r"\b\d+\.\d+(?:\.\d+)?\b|\bversion\b", re.IGNORECASE)
_OPENERS, _CLOSERS = "([{", ")]}"

#: What a question asks for, read from its words.
ASKS: dict[str, re.Pattern[str]] = {
    "command": re.compile(r"\b(?:command|cli|run|launch|start|serve|install|invoke|flag|option)\b"),
    "value": re.compile(r"\b(?:default|value|how many|how much|maximum|minimum|max|min|limit|size|number of)\b"),
    "version": re.compile(r"\bversions?\b"),
    "procedure": re.compile(r"^\s*how (?:do|can|to|should|would)\b|\bsteps?\b"),
    "name": re.compile(r"^\s*(?:which|what|who)\b"),
}
#: The names of :func:`features`' entries, in order (the weights file holds one weight per name).
FEATURES = (
    "overlap", "bm25", "new_terms", "command", "command_asked", "value", "value_asked", "version_asked",
    "code", "code_procedure", "intro", "row", "position", "rank", "length", "long", "source_file",
    "question_terms", "sentence_procedure", "overlap_rank",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class LeadUnit:
    """A whole unit of a shown excerpt: ``ranges`` of ``file_path`` (one, or the sentence and the block it
    introduces), the text of each, and where it stands."""

    number: int
    file_path: str
    ranges: tuple[tuple[int, int], ...]
    parts: tuple[str, ...]
    kind: Kind
    #: Its place among the units of its excerpt, from 0 (first) to 1 (last).
    position: float
    source_file: bool

    @property
    def text(self) -> str:
        """Its text, parts joined by a line."""
        return "\n".join(self.parts)

    def render(self) -> str:
        """As shown in an answer: each part followed by its citation, a code part as a fenced block."""
        shown: list[str] = []
        for part, (first, last) in zip(self.parts, self.ranges):
            citation = cite(self.file_path, first, last)
            is_code = self.kind == "code" or (self.kind == "intro" and part.startswith(_FENCE))
            if is_code and not part.startswith(_FENCE):
                part = f"{_FENCE}\n{part}\n{_FENCE}"
            shown.append(f"{part}\n{citation}" if is_code else f"{part} {citation}")
        return "\n\n".join(shown)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _balanced(text: str) -> int:
    """Open brackets left in ``text`` (strings not parsed: a rough count)."""
    return sum(text.count(c) for c in _OPENERS) - sum(text.count(c) for c in _CLOSERS)


def _lines(text: str, offset: int) -> list[tuple[int, str]]:
    """``(start, line)`` of every line of ``text`` (no line ending), ``start`` counted from ``offset``."""
    found: list[tuple[int, str]] = []
    for line in text.splitlines(keepends=True):
        found.append((offset, line.rstrip("\r\n")))
        offset += len(line)
    return found


def _statements(lines: Sequence[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """The statements of source lines: ``(start, end, text)``, lines joined until their brackets close."""
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        start, line = lines[i]
        if not line.strip() or COMMENT.match(line) or sum(c.isalnum() for c in line) < 3:
            i += 1
            continue
        j, depth = i, _balanced(line)
        while depth > 0 and j + 1 < len(lines) and j - i + 1 < MAX_STATEMENT_LINES:
            j += 1
            depth += _balanced(lines[j][1])
        if depth == 0 or (depth < 0 and j == i):
            body = [text for _, text in lines[i : j + 1]]
            margin = min(_indent(t) for t in body if t.strip())
            text = "\n".join(t[margin:] for t in body)
            begin = start + _indent(line)
            found.append((begin, lines[j][0] + len(lines[j][1]), text))
        i = j + 1
    return found


def _inside_block(text: str, first: int) -> bool:
    """Whether character ``first`` of a Markdown ``text`` lies inside a fenced block (an odd number of fences
    before it)."""
    return sum(1 for line in text[:first].splitlines() if line.lstrip().startswith(_FENCE)) % 2 == 1


def _prose(lines: Sequence[tuple[int, str]], inside: bool = False) -> list[tuple[Kind, int, int, str]]:
    """The units of Markdown lines: ``(kind, start, end, text)`` of sentences, rows and fenced blocks, in
    order; a sentence ending with ``:`` is kept only when a block follows it (then as ``intro``, the block
    right after). ``inside``: the lines start inside a fenced block, whose rest is no unit."""
    found: list[tuple[Kind, int, int, str]] = []
    paragraph: list[tuple[int, str]] = []

    def flush() -> None:
        if not paragraph:
            return
        # the paragraph's characters, line endings as blanks: a sentence found in it is its own range
        start = paragraph[0][0]
        flat = ""
        for at, text in paragraph:
            flat += " " * (at - start - len(flat)) + text
        cursor = 0
        for sentence in sentences(flat):
            at = flat.find(sentence, cursor)
            if at < 0:
                break
            cursor = at + len(sentence)
            wrapped = any(at < a - start < cursor for a, _ in paragraph[1:])
            if finished(sentence) or not wrapped:  # an unfinished text is whole only as a whole line
                found.append(("sentence", start + at, start + cursor, " ".join(sentence.split())))
        paragraph.clear()

    i = 0
    while inside and i < len(lines):  # the end of a block cut by the excerpt's start
        inside = not lines[i][1].lstrip().startswith(_FENCE)
        i += 1
    while i < len(lines):
        start, line = lines[i]
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j][1].strip().startswith(_FENCE):
                j += 1
            if j < len(lines) and j - i - 1 <= MAX_CODE_LINES:  # a closed block of a readable length
                margin = _indent(line)
                body = "\n".join(text[margin:] if _indent(text) >= margin else text for _, text in lines[i : j + 1])
                found.append(("code", start + margin, lines[j][0] + len(lines[j][1]), body))
            else:
                found.append(("code", -1, -1, ""))  # a block cut by the excerpt: what introduces it has nothing
            i = j + 1
            continue
        if not stripped or _HEADING.match(line) or _TABLE_RULE.match(line) or _MARKUP.match(line):
            flush()
        elif stripped.startswith("|"):
            flush()
            if len(sentences(stripped)) == 1:
                found.append(("row", start + _indent(line), start + len(line.rstrip()), stripped))
        elif _LIST_MARK.match(line):
            flush()
            mark = _LIST_MARK.match(line)
            assert mark is not None
            paragraph.append((start + mark.end(), line[mark.end() :]))
        else:
            paragraph.append((start, line))
        i += 1
    flush()
    return _attach(found)


def _attach(found: Sequence[tuple[Kind, int, int, str]]) -> list[tuple[Kind, int, int, str]]:
    """Sentences ending with ``:`` joined to the block right after them (as ``intro``), or dropped."""
    kept: list[tuple[Kind, int, int, str]] = []
    for i, unit in enumerate(found):
        kind, start, end, text = unit
        if start < 0:
            continue
        if kind == "sentence" and text.rstrip().endswith(":"):
            after = found[i + 1] if i + 1 < len(found) else None
            if after is not None and after[0] == "code" and after[1] >= 0:
                kept.append(("intro", start, end, text))
            continue
        kept.append(unit)
    return kept


def _unclosed_span(text: str) -> bool:
    return text.replace(_FENCE, "").count("`") % 2 == 1


def candidates(excerpts: Sequence[Excerpt], reader: SpanReader) -> list[LeadUnit]:
    """Every whole unit of the shown ranges of ``excerpts`` (module docstring), in the excerpts' order."""
    found: list[LeadUnit] = []
    seen: set[str] = set()
    for number, path, text, shown in shown_texts(excerpts, reader):
        source_file = PurePosixPath(path).suffix.lower() not in PROSE_SUFFIXES
        raw: list[tuple[Kind, tuple[tuple[int, int], ...], tuple[str, ...]]] = []
        for first, last in shown:
            lines = _lines(text[first:last], first)
            if source_file:
                raw += [("code", ((a, b),), (t,)) for a, b, t in _statements(lines)]
                continue
            units = _prose(lines, _inside_block(text, first))
            for i, (kind, a, b, t) in enumerate(units):
                if kind == "intro":
                    block = units[i + 1]
                    raw.append(("intro", ((a, b), (block[1], block[2])), (t, block[3])))
                elif kind != "sentence" or not _unclosed_span(t):
                    raw.append((kind, ((a, b),), (t,)))
        for i, (kind, ranges, parts) in enumerate(raw):
            key = "\n".join(parts)
            if key in seen or sum(c.isalpha() for c in key) < 6:
                continue
            seen.add(key)
            position = i / (len(raw) - 1) if len(raw) > 1 else 0.0
            found.append(LeadUnit(number, path, ranges, parts, kind, position, source_file))
    return found


def asks(question: str) -> dict[str, bool]:
    """What ``question`` asks for (:data:`ASKS`)."""
    lowered = question.lower()
    return {name: pattern.search(lowered) is not None for name, pattern in ASKS.items()}


def features(question: str, units: Sequence[LeadUnit]) -> list[list[float]]:
    """The features of every unit against ``question``, in the order of :data:`FEATURES`."""
    if not units:
        return []
    asked = asks(question)
    tokens = [set(_core.tokenize(u.text)) for u in units]
    wanted = set(_core.tokenize(clean_query(question)))
    df = {t: sum(t in s for s in tokens) for t in wanted}
    idf = {t: math.log(1 + len(units) / (1 + n)) for t, n in df.items()}
    whole = sum(idf.values()) or 1.0
    bm25 = [0.0] * len(units)
    query = clean_query(question)
    if query:
        ids, scores = _core.Bm25Index.build([u.text for u in units]).search(query, len(units))
        top = max(scores, default=0.0) or 1.0
        for i, s in zip(ids, scores):
            bm25[i] = s / top
    lowered_q = question.lower()
    q_terms = {t for t in key_terms(question) if len(t) > 2}
    rows: list[list[float]] = []
    for unit, own, b in zip(units, tokens, bm25):
        text = unit.text
        lowered = text.lower()
        overlap = sum(idf[t] for t in wanted & own) / whole
        new_terms = sum(1 for t in key_terms(text) if not contains(lowered_q, t))
        command = bool(_COMMAND.search(text) or _FLAG.search(text))
        value = bool(_VALUE.search(text))
        version = bool(_VERSION.search(text))
        code = unit.kind in ("code", "intro")
        words = len(text.split())
        rank = 1.0 / unit.number
        matched = sum(contains(lowered, t) for t in q_terms) / len(q_terms) if q_terms else 0.0
        rows.append([
            overlap, b, math.log1p(new_terms), float(command), float(command and asked["command"]), float(value),
            float(value and asked["value"]), float(version and asked["version"]), float(code),
            float(code and asked["procedure"]), float(unit.kind == "intro"), float(unit.kind == "row"),
            unit.position, rank, math.log1p(words), float(words > 40), float(unit.source_file), matched,
            float(unit.kind == "sentence" and asked["procedure"]), overlap * rank,
        ])  # fmt: skip
    return rows


@dataclass(frozen=True, slots=True)
class LeadModel:
    """The fitted ranking: a weight per feature, and the most words the lead takes beyond its best unit."""

    weights: tuple[float, ...]
    budget: int

    def scores(self, question: str, units: Sequence[LeadUnit]) -> list[float]:
        """The score of every unit against ``question``."""
        return [sum(w * x for w, x in zip(self.weights, row)) for row in features(question, units)]


@cache
def lead_model(path: Path = WEIGHTS_FILE) -> LeadModel:
    """The weights of ``path``, read once; a missing or damaged file is one clear error naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        names, weights, budget = data["features"], data["weights"], data["budget"]
        if list(names) != list(FEATURES) or len(weights) != len(FEATURES):
            raise ValueError(f"features {names!r} are not {list(FEATURES)!r}")
        return LeadModel(tuple(float(w) for w in weights), int(budget))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"the lead's weights {path} cannot be used ({exc}): reinstall fastrag or run "
                        "benches/answer_lead.py --write") from exc  # fmt: skip


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 1.0


def choose(question: str, units: Sequence[LeadUnit], model: LeadModel) -> list[LeadUnit]:
    """The units that lead the answer to ``question``, by ``model`` (:func:`pick`)."""
    return pick(question, units, model.scores(question, units), model.budget)


def pick(question: str, units: Sequence[LeadUnit], scores: Sequence[float], budget: int) -> list[LeadUnit]:
    """The units that lead, best ``scores`` first: the best one, then the next best while the words fit in
    ``budget`` (near duplicates of a chosen unit skipped). None when no unit shares a word with ``question``."""
    wanted = set(_core.tokenize(clean_query(question)))
    tokens = [set(_core.tokenize(u.text)) for u in units]
    scored = [(s, i) for i, s in enumerate(scores) if wanted & tokens[i]]
    chosen: list[int] = []
    words = 0
    for _, i in sorted(scored, key=lambda t: (-t[0], t[1])):
        size = len(units[i].text.split())
        if chosen and words + size > budget:
            continue
        if any(_overlap(tokens[i], tokens[j]) > NEAR_DUPLICATE for j in chosen):
            continue
        chosen.append(i)
        words += size
        if words >= budget:
            break
    return [units[i] for i in chosen]


def render_lead(chosen: Sequence[LeadUnit]) -> str:
    """The lead as shown: prose units in one paragraph, a code unit on its own lines."""
    parts: list[str] = []
    prose: list[str] = []
    for unit in chosen:
        if unit.kind == "sentence" and finished(unit.text):  # one that does not end as a sentence: its own line
            prose.append(unit.render())
            continue
        if prose:
            parts.append(" ".join(prose))
            prose = []
        parts.append(unit.render())
    if prose:
        parts.append(" ".join(prose))
    return "\n\n".join(parts)


def lead(question: str, excerpts: Sequence[Excerpt], reader: SpanReader, model: LeadModel | None = None) -> str:
    """The lead of the answer to ``question`` from the shown ``excerpts`` (empty when nothing matches)."""
    units = candidates(excerpts, reader)
    return render_lead(choose(question, units, model or lead_model())) if units else ""
