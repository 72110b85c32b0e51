"""Grounded answers: every answer variant measured with ``evaluate_answers``' metrics, chosen out of fold.

Run from the project root after ``make index`` and ``search_dataset`` of the four answered sets (docs and
code, public and dev, k = 10, into data/output/search_results)::

    .venv/bin/python benches/answer_variants.py [--limit N]

SmolLM2 (the packaged model) generates twice per question, once per prompt style (cached in
data/bench/answer_variants/, so a rerun only re-scores):

- ``plain``: the context of ``build_prompt`` and the original system prompt (the pipeline before);
- ``grounded``: the same context (less the key lines' reserve) with its 3 key lines first and the
  short-answer system prompt (:func:`fastrag.answering.grounding.grounded_prompt`).

The variants are then the grounding policies (``model``, ``fallback``, ``append``, ``quote``) with 1–4
quoted key lines, plus ``lead400``: no model, the first 400 characters of the top retrieved span and its
citation. Each answer is scored per question (:func:`fastrag.evaluation.answer_metrics.score_answer`).

**Out of fold**: the questions of the four sets are pooled and cut into 5 folds by question (a hash of the
question id); for each fold the variant with the best objective on the 4 other folds is chosen, among the
variants whose median answer there is ≤ 80 words and that have no degenerate answer, and scored on the
held-out fold. Objective = mean over questions of the mean of key-term recall and word recall (those
defined). The table prints every variant in sample (all questions, and dev docs alone) and the pooled
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
from fastrag.answering.grounding import GROUNDINGS, Grounding, grounded_prompt, key_lines
from fastrag.answering.grounding import ground_answer as ground
from fastrag.answering.model_files import resolve_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Prompt, SpanReader, build_prompt, cite
from fastrag.config import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS
from fastrag.evaluation.answer_metrics import QuestionScore, score_answer, summarize
from fastrag.evaluation.datasets import ground_truth, load_dataset, load_search_results
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
SETS = ("docs_public", "docs_dev", "code_public", "code_dev")
CACHE = ROOT / "data/bench/answer_variants"
FOLDS = 5
MAX_MEDIAN_WORDS = 80


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


def eligible(scores: Sequence[QuestionScore]) -> bool:
    return statistics.median(s.words for s in scores) <= MAX_MEDIAN_WORDS and not any(s.degenerate for s in scores)


def row(name: str, scores: Sequence[QuestionScore]) -> str:
    r = summarize(scores)
    bad = sum(r.degenerate.values())
    return (
        f"| {name} | {r.key_recall:.3f} | {r.word_recall:.3f} | {r.median_words:g} | {bad} | "
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

    raw_plain, p_plain, s_plain = generate("plain", generator, rows, plain)
    raw_ground, p_ground, s_ground = generate("grounded", generator, rows, grounded)
    print(json.dumps({"seconds_per_question": {"plain": round(s_plain, 3), "grounded": round(s_ground, 3)}}))
    four = {
        r.question_id: key_lines(r.question, p_ground[r.question_id].excerpts, reader, similarity, 4)
        for _, r, _ in rows
    }

    answers: dict[str, Callable[[MinimalSearchResults], str]] = {
        "plain prompt, model text": lambda r: finish_answer(raw_plain[r.question_id], p_plain[r.question_id].excerpts),
        "lead400 (no model)": lambda r: _lead(r, reader),
    }

    def policy_answer(policy: Grounding, n: int) -> Callable[[MinimalSearchResults], str]:
        def make(r: MinimalSearchResults) -> str:
            prompt = replace(p_ground[r.question_id], key_lines=four[r.question_id][:n])
            return ground(raw_ground[r.question_id], prompt, policy)

        return make

    for policy in GROUNDINGS:
        for n in (1, 2, 3, 4) if policy != "model" else (3,):
            label = f"grounded prompt, {policy}" + (f", {n} lines" if policy != "model" else "")
            answers[label] = policy_answer(policy, n)
    scores: dict[str, list[QuestionScore]] = {}
    for label, answer_of in answers.items():
        scores[label] = [
            score_answer(r.question_id, r.question, ref.answer, answer_of(r), r.retrieved_sources) for _, r, ref in rows
        ]
    sets = [name for name, _, _ in rows]
    folds = [fold_of(r.question_id) for _, r, _ in rows]
    head = "| variant | key-term recall | word recall | median words | degenerate | citation validity | objective |"
    line = "|---|---|---|---|---|---|---|"
    print(f"\nIn sample, all {len(rows)} questions (docs + code, public + dev):\n\n{head}\n{line}")
    for label, s in scores.items():
        print(row(label, s))
    print(f"\nIn sample, dev docs ({sets.count('docs_dev')} questions):\n\n{head}\n{line}")
    for label, s in scores.items():
        print(row(label, [x for x, name in zip(s, sets) if name == "docs_dev"]))
    held: list[tuple[int, QuestionScore, str]] = []
    print("\nOut of fold (5 folds by question):\n")
    for fold in range(FOLDS):
        train = {lab: [x for x, f in zip(s, folds) if f != fold] for lab, s in scores.items()}
        ok = [lab for lab, s in train.items() if eligible(s)] or list(train)
        best = max(ok, key=lambda lab: objective(train[lab]))
        print(f"- fold {fold}: chose {best!r} (objective on the other folds {objective(train[best]):.3f})")
        held += [(i, scores[best][i], sets[i]) for i, f in enumerate(folds) if f == fold]
    held.sort(key=lambda t: t[0])
    print(f"\n{head}\n{line}")
    print(row("out of fold, all questions", [s for _, s, _ in held]))
    print(row("out of fold, dev docs", [s for _, s, name in held if name == "docs_dev"]))


def _lead(r: MinimalSearchResults, reader: SpanReader) -> str:
    if not r.retrieved_sources:
        return ""
    top = r.retrieved_sources[0]
    end = min(top.last_character_index, top.first_character_index + 400)
    text = reader.text(top.file_path)[top.first_character_index : end]
    return f"{text}\n\nSources: {cite(top.file_path, top.first_character_index, end)}"


if __name__ == "__main__":
    main(sys.argv[1:])
