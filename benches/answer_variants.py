"""Grounded answers: every answer variant measured with ``evaluate_answers``' metrics, chosen out of fold.

Run from the project root after ``make index`` and ``search_dataset`` of the four answered sets (docs and
code, public and dev, k = 10, into data/output/search_results)::

    .venv/bin/python benches/answer_variants.py [--limit N] [--plain]

SmolLM2 (the packaged model) generates once per question and prompt style (cached in
data/bench/answer_variants/, so a rerun only re-scores):

- ``grounded``: the context of ``build_prompt`` (less the key lines' reserve) with its 3 key lines first
  and the short-answer system prompt (:func:`fastrag.answering.grounding.grounded_prompt`);
- ``plain`` (with ``--plain``): the same context and the original system prompt (the pipeline before).

The variants are then the grounding policies (``model``, ``fallback``, ``append``, ``quote``) with 1–4
quoted key lines, ``lead`` with 1–6 key lines and every support threshold of :data:`THRESHOLDS`, plus
``lead400``: no model, the first 400 characters of the top retrieved span and its citation. Each answer
is scored per question (:func:`fastrag.evaluation.answer_metrics.score_answer`) and audited
(:func:`fastrag.answering.grounding.audit_answer`: every shown sentence against the ranges it cites, by
the variant's own support threshold, the shipped one for the variants without).

**Out of fold**: the questions of the four sets are pooled and cut into 5 folds by question (a hash of the
question id); for each fold the variant with the best objective on the 4 other folds is chosen, among the
*eligible* variants there: median answer ≤ 70 words, no degenerate answer, no empty code block, invented
link or truncated sentence, support rate ≥ 0.95; and scored on the held-out fold. A looser support
threshold is taken over a stricter one only for a gain of more than :data:`MIN_GAIN` in the objective on
the training folds. Objective = mean over questions of the mean of key-term recall and word recall (those
defined). The table prints every variant in sample (all questions, and docs alone) and the pooled
out-of-fold scores of the chosen ones.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from fastrag.answering.answer import block_similarity, prompt_sources
from fastrag.answering.citations import finish_answer
from fastrag.answering.generator import Generator, load_generator
from fastrag.answering.grounding import GROUNDINGS, Grounding, audit_answer, grounded_answer, grounded_prompt, key_lines
from fastrag.answering.model_files import resolve_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Prompt, SpanReader, build_prompt, cite
from fastrag.answering.support import SUPPORT_THRESHOLD, Audit
from fastrag.config import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS
from fastrag.evaluation.answer_metrics import QuestionScore, score_answer, summarize
from fastrag.evaluation.datasets import ground_truth, load_dataset, load_search_results
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
SETS = ("docs_public", "docs_dev", "code_public", "code_dev")
CACHE = ROOT / "data/bench/answer_variants"
FOLDS = 5
MAX_MEDIAN_WORDS = 70
MIN_SUPPORT_RATE = 0.95
#: A looser support threshold is chosen over a stricter one (same policy and lines) only when its objective
#: on the training folds is higher by more than this: otherwise the stricter one is taken (fewer of the
#: model's words shown for no measured gain).
MIN_GAIN = 0.005
#: Support thresholds of the ``lead`` variants (:data:`fastrag.answering.support.SUPPORT_THRESHOLD`).
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: Key lines of the ``lead`` variants.
LEAD_LINES = (1, 2, 3, 4, 5, 6)


def load_sets(limit: int | None) -> list[tuple[str, MinimalSearchResults, AnsweredQuestion]]:
    """(set name, search result, reference) of every question, the first ``limit`` of each set."""
    rows = []
    for name in SETS:
        results = load_search_results(ROOT / f"data/output/search_results/dataset_{name}.json")
        path = ROOT / f"data/datasets/AnsweredQuestions/dataset_{name}.json"
        refs = {q.question_id: q for q in ground_truth(load_dataset(path), path)}
        picked = [r for r in results.search_results if r.question_id in refs][:limit]
        rows += [(name, r, refs[r.question_id]) for r in picked]
    return rows


def generate(
    style: str,
    generator: Generator,
    rows: Sequence[tuple[str, MinimalSearchResults, AnsweredQuestion]],
    build: Callable[[MinimalSearchResults], Prompt],
) -> tuple[dict[str, str], dict[str, Prompt], float]:
    """Raw model text per question id (cached on disk), the prompts, and seconds per generated question."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"raw_{style}.json"
    raw: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    prompts = {r.question_id: build(r) for _, r, _ in rows}
    todo = [qid for qid in prompts if qid not in raw]
    started = time.perf_counter()
    for i, text in generator.generate_iter((prompts[q].text for q in todo), DEFAULT_MAX_NEW_TOKENS):
        raw[todo[i]] = text
    seconds = (time.perf_counter() - started) / max(len(todo), 1)
    path.write_text(json.dumps(raw))
    return raw, prompts, seconds


def fold_of(question_id: str) -> int:
    return int(hashlib.sha256(question_id.encode()).hexdigest(), 16) % FOLDS


def objective(scores: Sequence[QuestionScore]) -> float:
    per = []
    for s in scores:
        got = [v for v in (s.key_recall, s.word_recall) if v is not None]
        if got:
            per.append(statistics.fmean(got))
    return statistics.fmean(per) if per else 0.0


Scored = tuple[QuestionScore, Audit]


def total(audits: Sequence[Audit]) -> Audit:
    out = Audit()
    for a in audits:
        out.add(a)
    return out


def eligible(scored: Sequence[Scored]) -> bool:
    scores = [s for s, _ in scored]
    a = total([x for _, x in scored])
    return (
        statistics.median(s.words for s in scores) <= MAX_MEDIAN_WORDS
        and not any(s.degenerate for s in scores)
        and a.invented_links == a.truncated == a.empty_code_blocks == 0
        and a.support_rate >= MIN_SUPPORT_RATE
    )


def row(name: str, scored: Sequence[Scored]) -> str:
    scores = [s for s, _ in scored]
    r = summarize(scores)
    a = total([x for _, x in scored])
    bad = sum(r.degenerate.values())
    return (
        f"| {name} | {r.key_recall:.3f} | {r.word_recall:.3f} | {r.median_words:g} | {bad} | "
        f"{a.support_rate:.3f} | {a.invented_links} | {a.truncated} | {a.empty_code_blocks} | "
        f"{r.citation_validity:.3f} | {objective(scores):.3f} |"
    )


def main(argv: Sequence[str]) -> None:
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
    rows = load_sets(limit)
    reader = SpanReader()
    similarity = block_similarity()
    generator = load_generator(resolve_model("smollm2"), max_batch=DEFAULT_BATCH_SIZE)
    count, render = generator.count_tokens, generator.render

    def plain(r: MinimalSearchResults) -> Prompt:
        sources = prompt_sources(r.retrieved_sources)
        return build_prompt(r.question, sources, count, render, DEFAULT_PROMPT_BUDGET, reader, similarity=similarity)

    def grounded(r: MinimalSearchResults) -> Prompt:
        sources = prompt_sources(r.retrieved_sources)
        return grounded_prompt(r.question, sources, count, render, DEFAULT_PROMPT_BUDGET, reader, similarity)

    answers: dict[str, Callable[[MinimalSearchResults], str]] = {"lead400 (no model)": lambda r: _lead(r, reader)}
    #: The support threshold of each variant's own check (the shipped one for variants that have none), and
    #: the variant with the other threshold of the same policy and lines.
    thresholds: dict[str, float] = {}
    family: dict[str, str] = {}
    if "--plain" in argv:
        raw_plain, p_plain, s_plain = generate("plain", generator, rows, plain)
        print(json.dumps({"seconds_per_question": {"plain": round(s_plain, 3)}}))
        answers["plain prompt, model text"] = lambda r: finish_answer(
            raw_plain[r.question_id], p_plain[r.question_id].excerpts
        )
    raw_ground, p_ground, s_ground = generate("grounded", generator, rows, grounded)
    print(json.dumps({"seconds_per_question": {"grounded": round(s_ground, 3)}}))
    most = max(LEAD_LINES)
    keys = {
        r.question_id: key_lines(r.question, p_ground[r.question_id].excerpts, reader, similarity, most)
        for _, r, _ in rows
    }

    def policy_answer(policy: Grounding, n: int, threshold: float = 1.0) -> Callable[[MinimalSearchResults], str]:
        def make(r: MinimalSearchResults) -> str:
            prompt = replace(p_ground[r.question_id], key_lines=keys[r.question_id][:n])
            return grounded_answer(raw_ground[r.question_id], prompt, policy, threshold).answer

        return make

    for policy in GROUNDINGS:
        if policy == "lead":
            for threshold in THRESHOLDS:
                for n in LEAD_LINES:
                    label = f"grounded prompt, lead, support {threshold:g}, {n} lines"
                    answers[label] = policy_answer(policy, n, threshold)
                    thresholds[label] = threshold
                    family[label] = f"lead, {n} lines"
            continue
        for n in (1, 2, 3, 4) if policy != "model" else (3,):
            label = f"grounded prompt, {policy}" + (f", {n} lines" if policy != "model" else "")
            answers[label] = policy_answer(policy, n)
    scores: dict[str, list[Scored]] = {}
    for label, answer_of in answers.items():
        scores[label] = []
        for _, r, ref in rows:
            text = answer_of(r)
            score = score_answer(r.question_id, r.question, ref.answer, text, r.retrieved_sources)
            own = thresholds.get(label, SUPPORT_THRESHOLD)
            scores[label].append((score, audit_answer(text, reader, r.question, own)))
    sets = [name for name, _, _ in rows]
    docs = [name.startswith("docs") for name in sets]
    folds = [fold_of(r.question_id) for _, r, _ in rows]
    head = (
        "| variant | key-term recall | word recall | median words | degenerate | support rate | invented links "
        "| truncated | empty code | citation validity | objective |"
    )
    line = "|---|---|---|---|---|---|---|---|---|---|---|"
    print(f"\nIn sample, all {len(rows)} questions (docs + code, public + dev):\n\n{head}\n{line}")
    for label, s in scores.items():
        print(row(label, s))
    print(f"\nIn sample, docs (public + dev, {sum(docs)} questions):\n\n{head}\n{line}")
    for label, s in scores.items():
        print(row(label, [x for x, d in zip(s, docs) if d]))
    held: list[tuple[int, Scored, bool]] = []
    print("\nOut of fold (5 folds by question):\n")
    for fold in range(FOLDS):
        train = {lab: [x for x, f in zip(s, folds) if f != fold] for lab, s in scores.items()}
        ok = [lab for lab, s in train.items() if eligible(s)] or list(train)
        gain = {lab: objective([x for x, _ in train[lab]]) for lab in ok}
        best = max(ok, key=lambda lab: gain[lab])
        near = [
            lab for lab in ok if family.get(lab, lab) == family.get(best, best) and gain[lab] >= gain[best] - MIN_GAIN
        ]
        best = max(near, key=lambda lab: (thresholds.get(lab, 0.0), gain[lab]))
        print(
            f"- fold {fold}: chose {best!r} (objective on the other folds {objective([x for x, _ in train[best]]):.3f})"
        )
        held += [(i, scores[best][i], docs[i]) for i, f in enumerate(folds) if f == fold]
    held.sort(key=lambda t: t[0])
    print(f"\n{head}\n{line}")
    print(row("out of fold, all questions", [s for _, s, _ in held]))
    print(row("out of fold, docs (public + dev)", [s for _, s, d in held if d]))


def _lead(r: MinimalSearchResults, reader: SpanReader) -> str:
    if not r.retrieved_sources:
        return ""
    top = r.retrieved_sources[0]
    end = min(top.last_character_index, top.first_character_index + 400)
    text = reader.text(top.file_path)[top.first_character_index : end]
    return f"{text}\n\nSources: {cite(top.file_path, top.first_character_index, end)}"


if __name__ == "__main__":
    main(sys.argv[1:])
