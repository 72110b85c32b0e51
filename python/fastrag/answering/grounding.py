"""Grounded answers a small model can give: the key lines of the context first, and their quotes as a net.

A 135M-parameter model reads a 500-token context poorly: the evidence is retrieved, shown, and lost.
So the prompt starts with the :data:`KEY_LINES` lines (or sentences) of the shown context that best
match the question (:func:`key_lines`: BM25 over the candidate lines with the native core, plus the
embedding model's cosine when installed), and asks for a short answer in their words. After generation,
:func:`ground_answer` applies the :data:`GROUNDING` policy:

- ``model``: the model's text alone;
- ``fallback``: the model's text, unless it shares no key term (identifier, number, flag, quoted term,
  name: :func:`fastrag.evaluation.answer_metrics.key_terms`) with the shown context or is degenerate (a
  loop, one token repeated: :func:`~fastrag.evaluation.answer_metrics.degenerate`): then the key lines,
  quoted and cited, instead;
- ``append``: the model's text, then the key lines quoted and cited (the evidence under the answer);
  the key lines alone when that whole is degenerate (the model looped, or repeated the lines it was given);
- ``quote``: the key lines alone, quoted and cited;
- ``lead``: the best key line first (not a heading), cited: the source sentence that best answers the
  question (the model is asked nothing then: :func:`answer_prompt`); then the
  units of the model's text (sentences, list items, code blocks) that the sources support and that add
  something (:func:`supported_units`, by the check of :mod:`fastrag.answering.support`); then the other key
  lines, quoted and cited. Every sentence shown is a source's or supported by the range it cites; what
  is dropped is kept in :attr:`Grounded.dropped`, with the reason.

Every policy was measured with ``evaluate_answers`` on the public and dev question sets and chosen out
of fold (benches/RESULTS.md "Grounded answers"); the Qwen3 path uses the same prompt and context.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal, get_args

from fastrag import _core
from fastrag.answering.citations import expand_citations, finish_answer
from fastrag.answering.cleanup import answer_loops, clean_answer
from fastrag.answering.lead import lead
from fastrag.answering.prompt import (
    DEFAULT_PROMPT_BUDGET,
    EMPTY_ANSWER,
    NO_SOURCES_ANSWER,
    Excerpt,
    KeyLine,
    Prompt,
    Renderer,
    Similarity,
    Source,
    SpanReader,
    TokenCounter,
    build_prompt,
    messages,
    shown_texts,
)
from fastrag.answering.support import SUPPORT_THRESHOLD, Audit, Unit, Verdict, audit, judge, units
from fastrag.evaluation.answer_metrics import answer_text, contains, content_words, degenerate, key_terms
from fastrag.retrieval.retriever import clean_query
from fastrag.schemas import CITATION

#: What is done with the model's text (see the module docstring).
Grounding = Literal["model", "fallback", "append", "quote", "lead"]
GROUNDINGS: tuple[Grounding, ...] = get_args(Grounding)
#: The policy of ``answer``, ``answer_dataset`` and the server (chosen out of fold with :data:`KEY_LINES`).
GROUNDING: Grounding = "lead"
#: Key lines shown: the first leads the answer, the others are quoted under it (chosen out of fold among
#: 1–6, with :data:`GROUNDING`).
KEY_LINES = 6
#: Of those, the best ones shown first in the prompt (as measured; more cost prompt tokens).
PROMPT_KEY_LINES = 3
#: Longest key line, in characters: a longer line is split into sentences, a longer sentence cut.
KEY_LINE_CHARS = 200
#: Shortest key line worth quoting, in characters (``}``, ``else:``, a bare heading mark are not evidence).
MIN_KEY_LINE_CHARS = 12
#: A line's score is its BM25 score over the candidate lines (divided by the best) plus this times its
#: cosine with the question (when the embedding model is installed).
LINE_SEMANTIC_WEIGHT = 0.5
#: Lines compared by meaning: the best by BM25 (the embedding model costs ~10 ms a line here).
SEMANTIC_CANDIDATES = 12
#: A line sharing more than this share of its tokens with a better key line is not taken (table rows,
#: repeated signatures): quoting the same words twice adds nothing and reads as a loop.
NEAR_DUPLICATE = 0.6
#: Tokens kept out of the context's budget for the key lines.
KEY_LINES_RESERVE = 160

GROUNDED_SYSTEM_PROMPT = (
    "Answer questions about a code base using only the numbered sources. The key lines are the most "
    "relevant lines of the sources. Answer in one or two short sentences, reusing their exact names, "
    "flags and values. Cite the source you use by its number, like [1]."
)
#: Heads the quoted key lines.
QUOTE_HEADER = "From the sources:"

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(])")


def _pieces(line: str) -> list[tuple[int, int]]:
    """``(start, end)`` of a line's text: the line, or its sentences when it is longer than :data:`KEY_LINE_CHARS`."""
    if len(line.strip()) <= KEY_LINE_CHARS:
        return [(0, len(line))]
    cuts = [0, *(m.end() for m in _SENTENCE.finditer(line)), len(line)]
    return list(pairwise(cuts))


def _candidates(excerpts: Sequence[Excerpt], reader: SpanReader) -> list[KeyLine]:
    """Every line of the shown ranges (long lines split into sentences, cut at :data:`KEY_LINE_CHARS`)."""
    found: list[KeyLine] = []
    seen: set[str] = set()
    for number, path, text, shown in shown_texts(excerpts, reader):
        for first, last in shown:
            offset = first
            for line in text[first:last].splitlines(keepends=True):
                for a, b in _pieces(line):
                    piece = line[a:b]
                    start = offset + a + (len(piece) - len(piece.lstrip()))
                    whole = piece.strip()
                    body = whole[:KEY_LINE_CHARS].rstrip()
                    if _worth_quoting(body) and body not in seen:
                        seen.add(body)
                        found.append(KeyLine(number, path, start, start + len(body), body, len(whole) > len(body)))
                offset += len(line)
    return found


def _worth_quoting(line: str) -> bool:
    return len(line) >= MIN_KEY_LINE_CHARS and not line.startswith("```") and sum(c.isalpha() for c in line) >= 6


def key_lines(
    question: str,
    excerpts: Sequence[Excerpt],
    reader: SpanReader,
    similarity: Similarity | None = None,
    n: int = KEY_LINES,
) -> list[KeyLine]:
    """The ``n`` lines of the shown excerpts that best match ``question``, best first (none without a match).

    score = BM25 of the line among the candidate lines / the best line's BM25, plus
    :data:`LINE_SEMANTIC_WEIGHT` × max(0, cosine of the question and the line) for the
    :data:`SEMANTIC_CANDIDATES` best by BM25. Only lines with a question term (BM25 > 0) qualify, and none
    that is a near duplicate (:data:`NEAR_DUPLICATE`) of a better one.
    """
    lines = _candidates(excerpts, reader)
    if not lines or n <= 0:
        return []
    ids, scores = _core.Bm25Index.build([k.text for k in lines]).search(clean_query(question), len(lines))
    if not ids:
        return []
    best = max(scores)
    score = {i: s / best for i, s in zip(ids, scores)}
    if similarity is not None:
        top = ids[:SEMANTIC_CANDIDATES]
        for i, cosine in zip(top, similarity(question, [lines[i].text for i in top])):
            score[i] += LINE_SEMANTIC_WEIGHT * max(0.0, float(cosine))
    chosen: list[int] = []
    words: dict[int, set[str]] = {}
    for i in sorted(score, key=lambda i: (-score[i], i)):
        words[i] = set(_core.tokenize(lines[i].text))
        if not any(_overlap(words[i], words[j]) > NEAR_DUPLICATE for j in chosen):
            chosen.append(i)
            if len(chosen) == n:
                break
    return [lines[i] for i in chosen]


def _overlap(a: set[str], b: set[str]) -> float:
    """Share of the smaller token set found in the other (1.0 for two empty sets)."""
    return len(a & b) / min(len(a), len(b)) if a and b else 1.0


def grounded_prompt(
    question: str,
    sources: Sequence[Source],
    count: TokenCounter,
    render: Renderer,
    budget: int = DEFAULT_PROMPT_BUDGET,
    reader: SpanReader | None = None,
    similarity: Similarity | None = None,
    n: int = KEY_LINES,
) -> Prompt:
    """The prompt: the context of :func:`~fastrag.answering.prompt.build_prompt` within ``budget`` less
    :data:`KEY_LINES_RESERVE` tokens, its best :data:`PROMPT_KEY_LINES` key lines first, and
    :data:`GROUNDED_SYSTEM_PROMPT`; the prompt keeps all ``n`` key lines (to quote them)."""
    reader = reader or SpanReader()
    reserve = KEY_LINES_RESERVE if n > 0 else 0
    base = build_prompt(question, sources, count, render, budget - reserve, reader, similarity=similarity)
    if not base.excerpts:
        return base
    keys = key_lines(question, base.excerpts, reader, similarity, n)
    text = render(messages(question, base.excerpts, keys[:PROMPT_KEY_LINES], GROUNDED_SYSTEM_PROMPT))
    return Prompt(text, count([text])[0], base.excerpts, keys, lead(question, base.excerpts, reader), question)


#: Instructions of the short prompt (:func:`short_prompt`): the model joins and shortens the lines it is given.
SHORT_SYSTEM_PROMPT = (
    "Answer the question in one short sentence using only the numbered source lines. Reuse their exact "
    "names, flags and values. Cite the line you use by its number, like [1]."
)


def _lead_lines(prompt: Prompt) -> list[tuple[int, str]]:
    """``(excerpt number, text)`` of each cited piece of the lead, citations removed."""
    found: list[tuple[int, str]] = []
    at = 0
    for match in CITATION.finditer(prompt.lead):
        piece = prompt.lead[at : match.start()].strip().splitlines()
        text = "\n".join(line for line in piece if not line.lstrip().startswith("```")).strip()
        at = match.end()
        path, first, last = match.group(1), int(match.group(2)), int(match.group(3))
        number = next((n for n, e in enumerate(prompt.excerpts, 1) if e.shows(path, first, last)), 0)
        if text and number:
            found.append((number, text))
    return found


def short_prompt(prompt: Prompt, render: Renderer, count: TokenCounter) -> Prompt:
    """``prompt`` asking only for the lead and key lines joined and shortened: its text holds them alone.

    The excerpts, key lines and lead stay those of ``prompt`` (the answer is grounded on them); without a
    lead or key line the text is empty (nothing to join: no generation).
    """
    shown = _lead_lines(prompt)
    held = "\n".join(text for _, text in shown)
    shown += [(k.number, k.text) for k in prompt.key_lines[:PROMPT_KEY_LINES] if k.text not in held]
    if not shown:
        return replace(prompt, text="", tokens=0)
    lines = "\n".join(f"[{n}] {text}" for n, text in shown)
    chat = [
        {"role": "system", "content": SHORT_SYSTEM_PROMPT},
        {"role": "user", "content": f"Source lines:\n{lines}\n\nQuestion: {prompt.question.strip()}"},
    ]
    text = render(chat)
    return replace(prompt, text=text, tokens=count([text])[0])


def answer_prompt(prompt: Prompt, render: Renderer, count: TokenCounter) -> Prompt:
    """What the model is asked for an answer grounded on ``prompt``: nothing when the lead answers.

    Under the ``lead`` grounding the model's text shows only where the sources support it and it repeats
    no lead or key line: beside a lead it almost never adds anything, and it costs most of an answer's
    time (benches/RESULTS.md "Answer latency: the lead answers"). So a prompt with a lead is not
    generated from (empty text); one without is the :func:`short_prompt` of the key lines. Other
    groundings keep the whole ``prompt``.
    """
    if GROUNDING != "lead":
        return prompt
    if prompt.lead or not prompt.excerpts:
        return replace(prompt, text="", tokens=0)
    return short_prompt(prompt, render, count)


def quote(keys: Sequence[KeyLine]) -> str:
    """The key lines quoted, each with its ``[path:first-last]``."""
    return "\n".join([QUOTE_HEADER, *(f"> {k.quoted} {k.citation}" for k in keys)]) if keys else ""


def shares_key_term(answer: str, context: str) -> bool:
    """Whether the text of ``answer`` holds at least one key term that the ``context`` contains too."""
    lowered = context.lower()
    return any(contains(lowered, t) for t in key_terms(answer_text(answer)))


def ground_answer(raw: str, prompt: Prompt, grounding: Grounding = GROUNDING) -> str:
    """The answer as saved, from the model's raw text, by the ``grounding`` policy (module docstring).

    Without key lines (nothing matched the question) every policy but ``lead`` keeps the model's answer.
    """
    return grounded_answer(raw, prompt, grounding).answer


@dataclass(frozen=True, slots=True)
class Grounded:
    """An answer as saved (``answer``), its first line (``lead``, known before generation under ``lead``),
    and the units of the model's text that were not shown (``dropped``, with the reasons)."""

    answer: str
    lead: str = ""
    dropped: tuple[Verdict, ...] = ()


def grounded_answer(
    raw: str, prompt: Prompt, grounding: Grounding = GROUNDING, threshold: float = SUPPORT_THRESHOLD
) -> Grounded:
    """:func:`ground_answer` with what the ``lead`` policy dropped (``threshold``: least support shown)."""
    keys = prompt.key_lines
    if grounding == "lead":
        return _lead_answer(raw, prompt, threshold)
    model = finish_answer(raw, prompt.excerpts)
    if not keys or grounding == "model":
        return Grounded(model)
    if grounding == "quote":
        return Grounded(quote(keys))
    if grounding == "append":
        both = f"{clean_answer(expand_citations(raw, prompt.excerpts))}\n\n{quote(keys)}"
        return Grounded(both if not degenerate(answer_text(both)) else quote(keys))
    usable = not degenerate(answer_text(model)) and shares_key_term(model, prompt.context)
    return Grounded(model if usable else quote(keys))


def lead_line(prompt: Prompt) -> str:
    """The lead of a ``lead`` answer (:attr:`Prompt.lead`): whole units of the excerpts, cited; empty when
    none matches the question."""
    return prompt.lead


def _quoted_keys(prompt: Prompt) -> list[KeyLine]:
    """The key lines quoted under a ``lead`` answer: those the lead does not already hold."""
    shown = content_words(answer_text(prompt.lead))
    return [k for k in prompt.key_lines if _overlap(content_words(k.text), shown) <= NEAR_DUPLICATE or not shown]


def model_units(raw: str, excerpts: Sequence[Excerpt]) -> list[Unit]:
    """The units of the model's text, citations expanded, echoed ``Question:`` lines left out, up to a loop.

    A code block left open when generation stopped is marked ``unclosed``.
    """
    text = expand_citations(raw, excerpts)
    lines = [line for line in text.splitlines() if not line.strip().lower().startswith("question:")]
    kept: list[str] = []
    for line in lines:  # cut where the text starts to loop, as clean_answer does
        if answer_loops("\n".join([*kept, line, ""])):
            break
        kept.append(line)
    return units("\n".join(kept))


def _evidence(excerpts: Sequence[Excerpt]) -> str:
    return "\n".join(e.text for e in excerpts)


def _cited(unit: Unit, excerpts: Sequence[Excerpt]) -> list[Excerpt]:
    """The excerpts whose shown ranges hold a range ``unit`` cites."""
    return [e for e in excerpts if any(e.shows(*cited) for cited in unit.cited)]


def _best_support(
    unit: Unit, excerpts: Sequence[Excerpt], threshold: float, question: str
) -> tuple[Verdict, list[Excerpt]]:
    """The verdict on ``unit`` against the excerpts it cites (when it passes there), else against the one
    excerpt that supports it best; and that evidence."""
    own = _cited(unit, excerpts)
    if own:
        verdict = judge(unit, _evidence(own), threshold, question=question)
        if verdict.reason is None:
            return verdict, own
    tried = [(judge(unit, e.text, threshold, question=question), [e]) for e in excerpts]
    passed = [t for t in tried if t[0].reason is None]
    if passed:
        return max(passed, key=lambda t: t[0].support)
    return max(tried, key=lambda t: t[0].support) if tried else (Verdict(unit, "unsupported", 0.0), [])


def supported_units(
    raw: str, prompt: Prompt, threshold: float = SUPPORT_THRESHOLD
) -> tuple[list[tuple[Unit, list[Excerpt]]], list[Verdict]]:
    """The units of the model's text that are shown, each with the excerpts it cites, and those dropped.

    A unit is shown when :func:`~fastrag.answering.support.judge` passes it against its evidence, it
    repeats no key line nor earlier unit (more than :data:`NEAR_DUPLICATE` of its content words), and,
    when it ends with ``:``, the unit it introduces is shown too.
    """
    seen = [content_words(k.text) for k in prompt.key_lines]
    if prompt.lead:
        seen.append(content_words(answer_text(prompt.lead)))
    shown: list[tuple[Unit, list[Excerpt]]] = []
    dropped: list[Verdict] = []
    for unit in model_units(raw, prompt.excerpts):
        verdict, evidence = _best_support(unit, prompt.excerpts, threshold, prompt.question)
        words = content_words(unit.bare)
        if verdict.reason is None and any(_overlap(words, other) > NEAR_DUPLICATE for other in seen):
            verdict = Verdict(unit, "repetition", verdict.support)
        if verdict.reason is not None:
            if shown and _introduces(shown[-1][0]):
                dropped.append(Verdict(shown.pop()[0], "introduces nothing", 1.0))
            dropped.append(verdict)
            continue
        seen.append(words)
        shown.append((unit, evidence))
    if shown and _introduces(shown[-1][0]):
        dropped.append(Verdict(shown.pop()[0], "introduces nothing", 1.0))
    return shown, dropped


def _introduces(unit: Unit) -> bool:
    return not unit.code and unit.bare.endswith(":")


def _render(shown: Sequence[tuple[Unit, list[Excerpt]]]) -> str:
    """The shown units: prose in one paragraph, each unit followed by its citations; a code block on its own
    lines, its citations on the line after it."""
    parts: list[str] = []
    prose: list[str] = []
    for unit, evidence in shown:
        cites = "".join(e.citation for e in evidence)
        if unit.code:
            if prose:
                parts.append(" ".join(prose))
                prose = []
            parts.append(f"{unit.text.strip()}\n{cites}")
        else:
            prose.append(f"{unit.bare} {cites}")
    if prose:
        parts.append(" ".join(prose))
    return "\n\n".join(parts)


def _lead_answer(raw: str, prompt: Prompt, threshold: float) -> Grounded:
    """The ``lead`` policy (module docstring)."""
    if not prompt.excerpts:
        return Grounded(NO_SOURCES_ANSWER)
    shown, dropped = supported_units(raw, prompt, threshold)
    blocks = [prompt.lead, _render(shown), quote(_quoted_keys(prompt))]
    text = "\n\n".join(b for b in blocks if b)
    if not text:
        text = f"{EMPTY_ANSWER}\n\nSources: " + ", ".join(e.citation for e in prompt.excerpts[:3])
    return Grounded(text, prompt.lead, tuple(dropped))


#: Lines of a saved answer that claim nothing about the code base (skipped by :func:`audit_answer`).
NOTICES = (QUOTE_HEADER, EMPTY_ANSWER, NO_SOURCES_ANSWER)


def audit_answer(answer: str, reader: SpanReader, question: str = "", threshold: float = SUPPORT_THRESHOLD) -> Audit:
    """:func:`~fastrag.answering.support.audit` of a saved answer to ``question``, the cited ranges read
    with ``reader``."""
    return audit(answer, lambda path, first, last: reader.text(path)[first:last], NOTICES, question, threshold)
