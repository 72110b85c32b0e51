"""How good the answers of an ``answer_dataset`` output are, against a dataset's reference answers.

Every answer is read without its ``Sources:`` block (the line ``answer`` appends when the model cited
nothing) and without its ``[path:first-last]`` citations: a file path is evidence, not an answer, and
``prefix_caching.md`` in a citation must not count as the term ``prefix_caching``. What is left is the
answer's *text*. The measures, per question, then averaged over the questions (macro average):

**Key terms** of a text: its backticked (`` `x` ``) and double-quoted (``"x"``) terms whole; flags
(``--max-model-len``, ``-O``); numbers (``8000``, ``0.9``); identifiers (a word with ``_``, an inner ``.``
or ``/``, a camelCase hump, or letters and digits mixed: ``enable_prefix_caching``, ``torch.compile``,
``LLMEngine``, ``fp8``); and capitalised names (an all-capitals or mixed-case word anywhere, ``GPU``,
``LoRA``; a capitalised word that does not start a sentence, ``Ray``). Terms are lower-cased and
trailing punctuation is dropped.

A term is *contained* in a text when it occurs in the lower-cased text and the characters around it are
not letters, digits or ``_`` (so ``4`` is not contained in ``4096``).

**Key-term recall** of an answer = (key terms of the reference answer that the question does not contain
and that the answer's text contains) / (key terms of the reference answer that the question does not
contain). A question whose reference has no such term is left out of this mean (:attr:`AnswerReport.key_questions`).

**Word recall** = the same with content words: the index's tokens (:func:`fastrag._core.tokenize`:
lower-cased, stopwords dropped, stemmed, identifiers whole and split into parts) of the reference that
are not tokens of the question, and are tokens of the answer's text.

**Answer length**: words (whitespace-separated) of the answer's text; the median is reported.

**Degenerate answers** (words here: whitespace-separated, with a letter or digit, lower-cased): *empty*
(no letter or digit in the text), *one token repeated* (at least two words and one distinct word, or
one word making more than half of at least six), *loop* (a line of at least eight characters, not a
code fence, repeated; or a sequence of :data:`LOOP_NGRAM` words occurring :data:`LOOP_REPEATS` times
or more).

**Citation validity**: every ``[path:first-last]`` of the whole answer (``Sources:`` block included) is
*valid* when ``first <= last`` and the range lies inside one of the sources retrieved (shown) for the
question: same path, ``first_character_index <= first`` and ``last <= last_character_index``. Reported:
the share of citations that are valid, and the number of answers citing at least one range.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fastrag import _core
from fastrag.errors import UserError
from fastrag.schemas import CITATION, AnsweredQuestion, MinimalAnswer, MinimalSource

#: A loop: this many consecutive words occurring :data:`LOOP_REPEATS` times or more in one answer.
LOOP_NGRAM = 4
LOOP_REPEATS = 3

#: Where the ``Sources:`` block of a saved answer starts.
_SOURCES_BLOCK = re.compile(r"(?:^|\n)\s*Sources:\s*(?:\[|$)")
_BACKTICKED = re.compile(r"`([^`\n]{1,80})`")
_QUOTED = re.compile(r"\"([^\"\n]{1,60})\"")
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?![\w])")
_WORD = re.compile(r"[A-Za-z_][\w]*(?:[./][\w]+)*")
_SENTENCE_END = re.compile(r"[.!?:]\s*$")
_TRAILING = ".,;:!?)]}'\""


def answer_text(answer: str) -> str:
    """The text of a saved answer: without its ``Sources:`` block and without citations."""
    found = _SOURCES_BLOCK.search(answer)
    body = answer[: found.start()] if found else answer
    return CITATION.sub("", body).strip()


def _is_identifier(word: str) -> bool:
    inner = word.strip("_./")
    return (
        "_" in inner
        or "." in inner
        or "/" in inner
        or re.search(r"[a-z][A-Z]", inner) is not None
        or (re.search(r"[A-Za-z]", inner) is not None and re.search(r"\d", inner) is not None)
    )


def _is_name(word: str, starts_sentence: bool) -> bool:
    if len(word) < 2 or not word[0].isupper():
        return False
    if any(c.isupper() for c in word[1:]):  # GPU, LoRA, vLLM-style casing
        return True
    return not starts_sentence


def _normal(term: str) -> str:
    return term.strip().rstrip(_TRAILING).strip().lower()


def key_terms(text: str) -> set[str]:
    """The key terms of ``text`` (see the module docstring), lower-cased."""
    found: list[str] = []
    found += _BACKTICKED.findall(text)
    found += _QUOTED.findall(text)
    found += _FLAG.findall(text)
    found += _NUMBER.findall(text)
    for match in _WORD.finditer(text):
        word = match.group(0)
        before = text[: match.start()].rstrip(" \t\"'`(*")
        starts_sentence = not before or before.endswith("\n") or _SENTENCE_END.search(before) is not None
        if _is_identifier(word) or _is_name(word, starts_sentence):
            found.append(word)
    return {t for t in map(_normal, found) if t and any(c.isalnum() for c in t)}


def contains(text: str, term: str) -> bool:
    """Whether lower-cased ``text`` contains ``term`` with no letter, digit or ``_`` right around it."""
    start = text.find(term)
    while start >= 0:
        end = start + len(term)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(term, start + 1)
    return False


def content_words(text: str) -> set[str]:
    """The content words of ``text``: the index's tokens."""
    return set(_core.tokenize(text))


def degenerate(text: str) -> str | None:
    """Why an answer's text is degenerate (``"empty"``, ``"repeated token"``, ``"loop"``), or ``None``."""
    if not any(c.isalnum() for c in text):
        return "empty"
    words = [w for w in text.lower().split() if any(c.isalnum() for c in w)]  # not quote marks, bullets
    counts = Counter(words)
    top = counts.most_common(1)[0][1]
    if (len(words) >= 2 and len(counts) == 1) or (len(words) >= 6 and top * 2 > len(words)):
        return "repeated token"
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 8 and not line.strip().startswith("`")]
    grams = Counter(tuple(words[i : i + LOOP_NGRAM]) for i in range(len(words) - LOOP_NGRAM + 1))
    if len(set(lines)) < len(lines) or (grams and max(grams.values()) >= LOOP_REPEATS):
        return "loop"
    return None


@dataclass(frozen=True, slots=True)
class QuestionScore:
    """The measures of one answer; recalls are ``None`` when the reference has nothing to recall."""

    question_id: str
    key_recall: float | None
    word_recall: float | None
    words: int
    degenerate: str | None
    citations: int
    valid_citations: int


def _recall(wanted: Iterable[str], got: set[str] | str) -> float | None:
    wanted = list(wanted)
    if not wanted:
        return None
    if isinstance(got, str):
        return sum(contains(got, t) for t in wanted) / len(wanted)
    return sum(t in got for t in wanted) / len(wanted)


def _inside(path: str, first: int, last: int, sources: Sequence[MinimalSource]) -> bool:
    return first <= last and any(
        s.file_path == path and s.first_character_index <= first and last <= s.last_character_index for s in sources
    )


def score_answer(
    question_id: str, question: str, reference: str, answer: str, sources: Sequence[MinimalSource]
) -> QuestionScore:
    """The measures of one answer (see the module docstring)."""
    text = answer_text(answer)
    lowered, asked = text.lower(), question.lower()
    terms = sorted(t for t in key_terms(reference) if not contains(asked, t))
    question_words = content_words(question)
    words = sorted(content_words(reference) - question_words)
    cited = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in CITATION.finditer(answer)]
    return QuestionScore(
        question_id,
        _recall(terms, lowered),
        _recall(words, content_words(text)),
        len(text.split()),
        degenerate(text),
        len(cited),
        sum(_inside(p, a, b, sources) for p, a, b in cited),
    )


@dataclass(slots=True)
class AnswerReport:
    """The measures of a set of answers (means over the questions that have something to recall)."""

    questions: int
    key_recall: float
    key_questions: int
    word_recall: float
    word_questions: int
    median_words: float
    degenerate: dict[str, int] = field(default_factory=dict)
    citations: int = 0
    valid_citations: int = 0
    answers_citing: int = 0

    @property
    def citation_validity(self) -> float:
        """Share of the cited ranges that lie inside a shown source (1.0 when nothing is cited)."""
        return self.valid_citations / self.citations if self.citations else 1.0


def summarize(scores: Sequence[QuestionScore]) -> AnswerReport:
    """Average per-question measures (macro averages; see the module docstring)."""
    keys = [s.key_recall for s in scores if s.key_recall is not None]
    words = [s.word_recall for s in scores if s.word_recall is not None]
    return AnswerReport(
        questions=len(scores),
        key_recall=statistics.fmean(keys) if keys else 0.0,
        key_questions=len(keys),
        word_recall=statistics.fmean(words) if words else 0.0,
        word_questions=len(words),
        median_words=statistics.median(s.words for s in scores) if scores else 0.0,
        degenerate=dict(Counter(s.degenerate for s in scores if s.degenerate)),
        citations=sum(s.citations for s in scores),
        valid_citations=sum(s.valid_citations for s in scores),
        answers_citing=sum(1 for s in scores if s.citations),
    )


def score_answers(answers: Sequence[MinimalAnswer], references: Sequence[AnsweredQuestion]) -> list[QuestionScore]:
    """Score every answer whose question is in ``references`` (by ``question_id``); an error when none is."""
    by_id = {q.question_id: q for q in references}
    scores = [
        score_answer(a.question_id, a.question, by_id[a.question_id].answer, a.answer, a.retrieved_sources)
        for a in answers
        if a.question_id in by_id
    ]
    if not scores:
        raise UserError("no answered question of the answers file is in the dataset")
    return scores
