"""Prompt building: the instructions, a context of retrieved evidence cut to a token budget, citations.

On a 2-core CPU the prompt length drives the cost of an answer, so the context is not "the top
spans": it is the parts of the retrieved spans most related to the question, chosen block by block
until a budget counted in the model's own tokens is spent. A block is a paragraph (consecutive
non-blank lines, at most :data:`BLOCK_LINES` lines), scored by the question's terms it contains
(weighted by how rare they are among the candidate blocks), scaled up by how close its meaning is to
the question's when the caller passes a :data:`Similarity` (an embedding model), and weighted by the
rank of its span. Sources are shown numbered (``[1] short/path.md``); the model cites the numbers, and
:func:`~fastrag.answering.citations.expand_citations` turns them into ``[path:first-last]`` of exactly
the characters shown (one per shown range).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fastrag import _core
from fastrag.errors import UserError
from fastrag.indexing.corpus import read_as_written

#: Whole-prompt budget (system + context + question + chat template), in the model's tokens.
DEFAULT_PROMPT_BUDGET = 560
#: Retrieved spans that may contribute to the context (the best-ranked ones).
MAX_CONTEXT_SOURCES = 8
#: Longest block, in lines: long paragraphs and code blocks are split so that a budget is spent finely.
BLOCK_LINES = 4
#: How fast a span's weight falls with its rank: weight = 1 / (1 + RANK_DECAY * rank).
RANK_DECAY = 0.35
#: Weight of question terms found in the Markdown heading above a block (and not in the block itself).
HEADING_WEIGHT = 0.5
#: Share of the better neighbouring block's relevance added to a block's own.
SMOOTHING = 0.7
#: With a :data:`Similarity`, a block's term relevance is multiplied by 1 + SEMANTIC_WEIGHT × max(0, cosine):
#: the question's words decide which blocks count, their meaning orders the blocks that share the same
#: words. Measured with all-MiniLM-L6-v2 (benches/RESULTS.md "Answers"): weights 1.5–4 are within one
#: question of each other; adding the cosine instead reached C3's bar only by showing fewer key lines,
#: fusing the two rankings never reached it.
SEMANTIC_WEIGHT = 2.0
#: Path components shown in a source's header.
PATH_PARTS = 3
#: Shown between two non-adjacent blocks of one source.
GAP = "…"

SYSTEM_PROMPT = (
    "Answer questions about a code base using only the numbered sources. Be concise: one to three "
    "sentences that make sense without the question. Cite each source you use by its number, like [1]. "
    "If the sources do not contain the answer, say so."
)
#: Fixed answer when no source was retrieved (``--k 0`` or nothing matched): the model is not loaded.
NO_SOURCES_ANSWER = "No source was retrieved for this question, so there is nothing to ground an answer on."
#: Fixed answer when the model produced nothing usable.
EMPTY_ANSWER = "The sources do not give a clear answer to this question."

#: Counts the model's tokens of each text (one batched call).
TokenCounter = Callable[[Sequence[str]], list[int]]
#: Renders chat messages into the exact prompt text (the model's chat template).
Renderer = Callable[[Sequence[dict[str, str]]], str]
#: Cosine similarity of the question (first argument) to each text (one batched call), in [-1, 1].
Similarity = Callable[[str, Sequence[str]], Sequence[float]]

#: Tokens that carry no evidence: the corpus's name (``vLLM``, in nearly every span), as the core spells it.
#: Measured (benches/answer_bench.py c3): keeping them lost 7 docs key lines of 84.
IGNORED_TERMS = frozenset(_core.tokenize("vLLM"))

_HEADING = re.compile(r"^#{1,6}[ \t]+(.*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Source:
    """A retrieved span: ``file_path`` characters ``start:end`` (``str`` indices)."""

    file_path: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Excerpt:
    """The part of a source shown in the prompt, with the characters it covers."""

    source: Source
    start: int
    end: int
    text: str
    #: The character ranges actually shown (``start``–``end`` minus the gaps marked :data:`GAP`).
    parts: tuple[tuple[int, int], ...] = ()

    @property
    def shown(self) -> tuple[tuple[int, int], ...]:
        """The ranges of the file shown to the model: :attr:`parts`, or the whole ``start``–``end``."""
        return self.parts or ((self.start, self.end),)

    def shows(self, path: str, first: int, last: int) -> bool:
        """Whether the range ``first``–``last`` of ``path`` lies inside a range this excerpt shows (what a
        citation of it may name)."""
        return self.source.file_path == path and any(a <= first and last <= b for a, b in self.shown)

    @property
    def citation(self) -> str:
        """``[path:first-last]`` of exactly what was shown: one per shown range when gaps were cut out."""
        return "".join(cite(self.source.file_path, start, end) for start, end in self.shown)


@dataclass(frozen=True, slots=True)
class KeyLine:
    """A line (or sentence) of a shown excerpt that best matches the question: ``file_path`` ``start:end``.

    ``number`` is the excerpt's number in the prompt (1-based), so the model can cite it.
    """

    number: int
    file_path: str
    start: int
    end: int
    text: str
    #: The line went on past the longest key line: ``text`` stops there, maybe inside a word.
    cut: bool = False

    @property
    def citation(self) -> str:
        """``[path:first-last]`` of exactly this line."""
        return cite(self.file_path, self.start, self.end)

    @property
    def quoted(self) -> str:
        """The text as quoted: a cut line ends at its last whole word and a marked elision (:data:`GAP`)."""
        return f"{self.text.rsplit(maxsplit=1)[0]} {GAP}" if self.cut and " " in self.text else self.text


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt and what went into it."""

    text: str
    tokens: int
    excerpts: list[Excerpt] = field(default_factory=list)
    key_lines: list[KeyLine] = field(default_factory=list)
    #: The lead of the answer: whole units of the excerpts chosen for the question, cited
    #: (:func:`fastrag.answering.lead.lead`); empty when none matches it.
    lead: str = ""
    #: The question asked (what an answer's sentence says beyond it must come from the sources).
    question: str = ""

    @property
    def context(self) -> str:
        """The evidence text shown to the model (headers excluded)."""
        return "\n".join(e.text for e in self.excerpts)


def shown_texts(
    excerpts: Sequence[Excerpt], reader: SpanReader
) -> Iterator[tuple[int, str, str, tuple[tuple[int, int], ...]]]:
    """``(number, path, text of the file, shown ranges)`` of every excerpt, numbered from 1 as in the prompt."""
    for number, excerpt in enumerate(excerpts, 1):
        path = excerpt.source.file_path
        yield number, path, reader.text(path), excerpt.shown


def cite(file_path: str, start: int, end: int) -> str:
    """The citation format: ``[path:first-last]``."""
    return f"[{file_path}:{start}-{end}]"


# ----------------------------------------------------------------------------- terms


def terms(text: str) -> list[str]:
    """Content terms of ``text``: the index's own tokens (:func:`fastrag._core.tokenize`).

    Every identifier whole and split into its parts (``load_lora_adapter`` gives ``load_lora_adapter``,
    ``load``, ``lora``, ``adapt``), lower-cased, stopwords dropped, words stemmed (Snowball English), so
    an exact identifier match counts more than scattered words and the prompt weighs a question's words
    as retrieval does. The tokens of :data:`IGNORED_TERMS` are left out.
    """
    return [t for t in _core.tokenize(text) if t not in IGNORED_TERMS]


def _terms_batch(texts: list[str]) -> list[list[str]]:
    """:func:`terms` of many texts in one native call."""
    return [[t for t in row if t not in IGNORED_TERMS] for row in _core.tokenize_batch(texts)]


# ----------------------------------------------------------------------------- reading spans


class SpanReader:
    """Reads span texts, each file once.

    ``read`` gives the text of the file a result names: by default the path as written, relative to the
    working directory (:func:`~fastrag.indexing.corpus.read_as_written`: no link followed, a regular
    file); :meth:`fastrag.indexing.reading.IndexedFiles.text` reads it through the index, as indexed.
    It raises :class:`OSError` or a :class:`UserError` when the file cannot be read.
    """

    def __init__(self, read: Callable[[str], str] = read_as_written) -> None:
        self._read = read
        self._files: dict[str, str] = {}
        self._headings: dict[str, tuple[list[int], list[str]]] = {}

    def text(self, file_path: str) -> str:
        """The whole decoded file; a :class:`UserError` when it cannot be read."""
        cached = self._files.get(file_path)
        if cached is None:
            try:
                cached = self._read(file_path)
            except OSError as exc:
                raise UserError(f"cannot read source {file_path}: {exc.strerror or exc}") from exc
            self._files[file_path] = cached
        return cached

    def headings(self, file_path: str) -> tuple[list[int], list[str]]:
        """Start offsets and texts of the Markdown headings of a file."""
        found = self._headings.get(file_path)
        if found is None:
            matches = list(_HEADING.finditer(self.text(file_path)))
            found = ([m.start() for m in matches], [m.group(1) for m in matches])
            self._headings[file_path] = found
        return found


@dataclass(slots=True)
class _Block:
    rank: int
    source: Source
    start: int
    end: int
    text: str
    score: float = 0.0
    tokens: int = 0


def _blocks(rank: int, source: Source, text: str) -> list[_Block]:
    """Split a span into paragraphs of at most :data:`BLOCK_LINES` non-blank lines (with offsets)."""
    span = text[source.start : source.end]
    blocks: list[_Block] = []
    lines: list[tuple[int, str]] = []

    def close() -> None:
        if lines:
            first, last = lines[0], lines[-1]
            start = source.start + first[0]
            end = source.start + last[0] + len(last[1])
            blocks.append(_Block(rank, source, start, end, "\n".join(t for _, t in lines)))
            lines.clear()

    offset = 0
    for line in span.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip():
            lines.append((offset, body.rstrip()))
            if len(lines) == BLOCK_LINES:
                close()
        else:
            close()
        offset += len(line)
    close()
    return blocks


# ----------------------------------------------------------------------------- the prompt


def short_path(file_path: str) -> str:
    """The last :data:`PATH_PARTS` components of a path: what the model needs to tell sources apart."""
    return "/".join(Path(file_path).parts[-PATH_PARTS:])


def messages(
    question: str, excerpts: Sequence[Excerpt], key_lines: Sequence[KeyLine] = (), system: str = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """The chat messages: instructions, then the key lines (if any), the numbered sources and the question.

    Sources are numbered ``[1]``, ``[2]``… with a short path: a full ``[path:first-last]`` header costs
    ~40 tokens of prompt per source, a number ~3. The model cites by number and
    :func:`~fastrag.answering.citations.expand_citations` writes the full ``[path:first-last]`` into the answer.
    """
    parts = [f"[{i}] {short_path(e.source.file_path)}\n{e.text}" for i, e in enumerate(excerpts, 1)]
    context = "\n\n".join(parts) if parts else "(no sources)"
    if key_lines:
        lines = "\n".join(f"[{k.number}] {k.text}" for k in key_lines)
        context = f"Key lines:\n{lines}\n\nSources:\n{context}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{context}\n\nQuestion: {question.strip()}"},
    ]


def build_prompt(
    question: str,
    sources: Sequence[Source],
    count: TokenCounter,
    render: Renderer,
    budget: int = DEFAULT_PROMPT_BUDGET,
    reader: SpanReader | None = None,
    max_sources: int = MAX_CONTEXT_SOURCES,
    similarity: Similarity | None = None,
) -> Prompt:
    """The prompt for ``question``: the best blocks of the best ``max_sources`` sources within ``budget`` tokens.

    ``count`` and ``render`` are the model's tokenizer and chat template, so the budget holds for the
    exact text the model reads (checked on the rendered prompt, dropping the weakest block if needed).
    ``similarity`` (optional) compares the question with each block and its heading (see :func:`_score`).
    """
    reader = reader or SpanReader()
    pool = [b for rank, s in enumerate(sources[:max_sources]) for b in _blocks(rank, s, reader.text(s.file_path))]
    base = render(messages(question, []))
    overhead = count([base])[0]
    if pool:
        for block, n in zip(pool, count([b.text for b in pool])):
            block.tokens = n
        header = max(count([f"[10] {short_path(s.file_path)}\n\n" for s in sources[:max_sources]]))
        _score(question, pool, reader, similarity)
        chosen = _choose(pool, budget - overhead, header)
    else:
        chosen = []
    while True:
        excerpts = _excerpts(chosen)
        text = render(messages(question, excerpts))
        tokens = count([text])[0]
        if tokens <= budget or not chosen:
            return Prompt(text, tokens, excerpts, question=question)
        chosen.remove(min(chosen, key=lambda b: (b.score, -b.rank)))


def _score(question: str, pool: list[_Block], reader: SpanReader, similarity: Similarity | None = None) -> None:
    """Score blocks for the question.

    relevance = idf-weighted question terms in the block, plus :data:`HEADING_WEIGHT` × those found only in
    the Markdown heading the block sits under; with ``similarity``, times 1 + :data:`SEMANTIC_WEIGHT` ×
    max(0, cosine of the question and the heading + block text). score = (relevance + :data:`SMOOTHING` ×
    the better neighbour's relevance) / (1 + :data:`RANK_DECAY` × the span's rank). Neighbours count
    because the evidence is a region (a heading and its paragraph, a signature and its body), not one line.
    A block without any question term stays at relevance 0: meaning reorders what the words found.
    """
    wanted = set(terms(question))
    headings = [_heading(reader, b) for b in pool]
    tokens = _terms_batch([b.text for b in pool] + headings)
    found = [set(t) & wanted for t in tokens[: len(pool)]]
    headed = [(set(t) & wanted) - f for t, f in zip(tokens[len(pool) :], found)]
    df = Counter(t for ts in found for t in ts)
    n = len(pool)

    def idf(t: str) -> float:
        return math.log(1.0 + n / max(df[t], 1))

    relevance = [sum(map(idf, f)) + HEADING_WEIGHT * sum(map(idf, h)) for f, h in zip(found, headed)]
    if similarity is not None:
        texts = [f"{h}\n{b.text}" if h else b.text for h, b in zip(headings, pool)]
        unique = list(dict.fromkeys(t for t, r in zip(texts, relevance) if r > 0))  # nested spans repeat blocks
        cosine = dict(zip(unique, similarity(question, unique))) if unique else {}
        relevance = [
            r * (1.0 + SEMANTIC_WEIGHT * max(0.0, float(cosine.get(t, 0.0)))) for r, t in zip(relevance, texts)
        ]
    for i, block in enumerate(pool):
        near = [relevance[j] for j in (i - 1, i + 1) if 0 <= j < n and pool[j].rank == block.rank]
        block.score = (relevance[i] + SMOOTHING * max(near, default=0.0)) / (1.0 + RANK_DECAY * block.rank)


def _heading(reader: SpanReader, block: _Block) -> str:
    """The nearest Markdown heading above ``block`` (empty for other files)."""
    if not block.source.file_path.endswith((".md", ".rst")):
        return ""
    starts, texts = reader.headings(block.source.file_path)
    at = bisect.bisect_right(starts, block.start) - 1
    return texts[at] if at >= 0 else ""


def _choose(pool: list[_Block], budget: int, header: int) -> list[_Block]:
    """Greedy: best-scored blocks first, then the blocks right after chosen ones, while they fit."""
    chosen: list[_Block] = []
    sources: set[int] = set()
    left = budget

    def take(block: _Block) -> None:
        nonlocal left
        cost = block.tokens + 2 + (0 if block.rank in sources else header)
        if cost <= left and not _shown(block, chosen):
            chosen.append(block)
            sources.add(block.rank)
            left -= cost

    for block in sorted((b for b in pool if b.score > 0), key=lambda b: (-b.score, b.rank, b.start)):
        take(block)
    # Spend what is left on the context of what was chosen: the block after each one (answers
    # follow headings and signatures), then the one before, best-scored first.
    position = {id(b): i for i, b in enumerate(pool)}
    for step in (1, -1):
        for block in sorted(chosen, key=lambda b: (-b.score, b.rank)):
            i = position[id(block)] + step
            if 0 <= i < len(pool) and pool[i].rank == block.rank and pool[i] not in chosen:
                take(pool[i])
    if not chosen:  # nothing matched any question term: show the start of the best span
        for block in pool:
            if block.rank == 0:
                take(block)
    return chosen


def _shown(block: _Block, chosen: Sequence[_Block]) -> bool:
    """Whether any of ``block``'s characters is already in ``chosen`` (overlapping retrieved spans of
    one file split into blocks that repeat each other's lines)."""
    path = block.source.file_path
    return any(c.source.file_path == path and c.start < block.end and block.start < c.end for c in chosen)


def _excerpts(chosen: Sequence[_Block]) -> list[Excerpt]:
    """Group chosen blocks by source (in rank order), in file order, gaps marked with :data:`GAP`."""
    by_rank: dict[int, list[_Block]] = {}
    for block in chosen:
        by_rank.setdefault(block.rank, []).append(block)
    out: list[Excerpt] = []
    for rank in sorted(by_rank):
        blocks = sorted(by_rank[rank], key=lambda b: b.start)
        parts: list[str] = []
        ranges: list[tuple[int, int]] = []
        for prev, block in zip([None, *blocks], blocks):
            if prev is not None and not _adjacent(prev, block):
                parts.append(GAP)
                ranges.append((block.start, block.end))
            elif ranges:
                ranges[-1] = (ranges[-1][0], block.end)
            else:
                ranges.append((block.start, block.end))
            parts.append(block.text)
        out.append(Excerpt(blocks[0].source, blocks[0].start, blocks[-1].end, "\n".join(parts), tuple(ranges)))
    return out


def _adjacent(a: _Block, b: _Block) -> bool:
    """Whether only whitespace lies between two blocks of the same span (they were split from one run)."""
    return b.start - a.end <= 2
