"""The lead of an answer: the ranking of candidate units fitted and measured out of fold, by question.

Run from the project root after ``make index`` and ``search_dataset`` of the four answered sets (docs and
code, public and dev, k = 10, into data/output/search_results)::

    .venv/bin/python benches/answer_lead.py [--limit N] [--write] [--model N]
    .venv/bin/python benches/answer_lead.py --answers DIR     # the leads of saved answer_dataset outputs

For every question the prompt's excerpts are built as ``answer`` builds them; each candidate unit
(:func:`fastrag.answering.lead.candidates`) gets its features and a target: the mean of its key-term
recall and word recall against the reference answer (:func:`fastrag.evaluation.answer_metrics.score_answer`).
The weights are a ridge fit of the target on the features, both centred per question (a pairwise-like
fit: only the order within a question matters). The word budget is chosen among :data:`BUDGETS` on the
training folds (the best whose median lead is at most :data:`MAX_MEDIAN_WORDS` words). Out of fold: 5
folds by question (``answer_variants.fold_of``), each fold's leads made with the weights and budget
fitted on the other four. ``--write`` writes the weights fitted on all questions into the package
(``python/fastrag/answering/lead_weights.json``). ``--model N`` measures, on the first N questions of
each set, the lead of the whole answer too: the units (or, before, the best key line), then the
sentences of SmolLM2's text that the sources support (generated once, cached as ``answer_variants.py``
caches it).

Each lead is measured as ``evaluate_answers`` measures an answer, plus the sentence check of every unit
it shows (support rate), leads ending with ``:`` and leads with an unclosed code span.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from answer_variants import FOLDS, ROOT, SETS, fold_of, generate, load_sets, total

from fastrag.answering.answer import block_similarity, prompt_sources
from fastrag.answering.generator import load_generator
from fastrag.answering.grounding import QUOTE_HEADER, audit_answer, grounded_answer, grounded_prompt
from fastrag.answering.lead import (
    FEATURES,
    WEIGHTS_FILE,
    LeadModel,
    LeadUnit,
    candidates,
    features,
    pick,
    render_lead,
)
from fastrag.answering.model_files import resolve_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Prompt, SpanReader
from fastrag.config import DEFAULT_BATCH_SIZE
from fastrag.evaluation.answer_metrics import QuestionScore, answer_text, score_answer, summarize
from fastrag.evaluation.datasets import load_answers
from fastrag.schemas import AnsweredQuestion, MinimalSearchResults

#: Word budgets tried (the most words the lead takes beyond its best unit).
BUDGETS = (0, 15, 25, 30, 35, 40, 45)
#: Longest median lead, in words, of a budget that can be chosen (the issue's acceptance).
MAX_MEDIAN_WORDS = 40
#: Ridge penalty (features standardised).
RIDGE = 1.0

Row = tuple[str, MinimalSearchResults, AnsweredQuestion]


def target(score: QuestionScore) -> float:
    got = [v for v in (score.key_recall, score.word_recall) if v is not None]
    return statistics.fmean(got) if got else 0.0


def fit(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    """Ridge weights of the per-question centred targets on the per-question centred features."""
    x = np.vstack([a - a.mean(axis=0) for a in xs])
    y = np.concatenate([b - b.mean() for b in ys])
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = x / scale
    w = np.linalg.solve(z.T @ z + RIDGE * len(z) / 100 * np.eye(z.shape[1]), z.T @ y)
    return np.asarray(w / scale)


def lead_text(lead: str) -> str:
    """The words of a lead as measured (citations left out)."""
    return answer_text(lead)


def key_line_lead(prompt: Prompt) -> str:
    """The lead before: the best key line that is not a heading, cited (empty without key lines)."""
    keys = prompt.key_lines
    key = next((k for k in keys if not k.text.lstrip().startswith("#")), keys[0] if keys else None)
    return f"{key.quoted} {key.citation}" if key else ""


def lead_of(answer: str) -> str:
    """The lead of a saved answer: what comes before the quoted sources."""
    return answer.split(QUOTE_HEADER, 1)[0].strip()


def measure(name: str, leads: Sequence[tuple[Row, str]], reader: SpanReader) -> str:
    """One table row: the leads' measures."""
    scores = [score_answer(r.question_id, r.question, ref.answer, t, r.retrieved_sources) for (_, r, ref), t in leads]
    audits = [audit_answer(t, reader, r.question) for (_, r, _), t in leads]
    report = summarize(scores)
    colon = sum(1 for _, t in leads if t.rstrip().endswith(":"))
    unclosed = sum(1 for _, t in leads if t.replace("```", "").count("`") % 2 or t.count("```") % 2)
    a = total(audits)
    return (
        f"| {name} | {len(leads)} | {report.key_recall:.3f} | {report.word_recall:.3f} | {report.median_words:g} | "
        f"{a.support_rate:.3f} | {colon} | {unclosed} |"
    )


HEAD = (
    "| leads | questions | key-term recall | word recall | median words | support rate | ending ':' | unclosed span |\n"
    "|---|---|---|---|---|---|---|---|"
)


def saved(directory: Path) -> None:
    """The leads of the ``answer_dataset`` outputs of the four sets in ``directory``."""
    rows = load_sets(None)
    by_id = {r.question_id: row for row in rows for r in [row[1]]}
    reader = SpanReader()
    print(HEAD)
    for docs in (True, False, None):
        leads: list[tuple[Row, str]] = []
        for name in SETS:
            if docs is not None and name.startswith("docs") != docs:
                continue
            for a in load_answers(directory / f"dataset_{name}.json").search_results:
                if a.question_id in by_id:
                    leads.append((by_id[a.question_id], lead_of(a.answer)))
        print(measure(f"{directory.name}, {'docs' if docs else 'code' if docs is False else 'all'}", leads, reader))


def main(argv: Sequence[str]) -> None:
    if "--answers" in argv:
        saved(Path(argv[argv.index("--answers") + 1]))
        return
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
    rows = load_sets(limit)
    reader = SpanReader()
    similarity = block_similarity()
    generator = load_generator(resolve_model("smollm2"), max_batch=DEFAULT_BATCH_SIZE)
    units: list[list[LeadUnit]] = []
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    old: list[str] = []
    prompts: dict[str, Prompt] = {}
    for _, r, ref in rows:
        prompt = grounded_prompt(
            r.question, prompt_sources(r.retrieved_sources), generator.count_tokens, generator.render,
            DEFAULT_PROMPT_BUDGET, reader, similarity,
        )  # fmt: skip
        prompts[r.question_id] = prompt
        found = candidates(prompt.excerpts, reader)
        units.append(found)
        old.append(key_line_lead(prompt))
        xs.append(np.array(features(r.question, found), dtype=float).reshape(len(found), len(FEATURES)))
        ys.append(
            np.array([target(score_answer(r.question_id, r.question, ref.answer, u.render(), [])) for u in found])
        )
    folds = [fold_of(r.question_id) for _, r, _ in rows]

    def leads(model: LeadModel, which: Sequence[int]) -> list[str]:
        return [
            render_lead(pick(rows[i][1].question, units[i], list(xs[i] @ np.array(model.weights)), model.budget))
            for i in which
        ]

    def fitted(which: Sequence[int]) -> LeadModel:
        use = [i for i in which if len(ys[i]) > 1]
        w = tuple(float(v) for v in fit([xs[i] for i in use], [ys[i] for i in use]))
        made = {b: leads(LeadModel(w, b), which) for b in BUDGETS}
        fits = [b for b in BUDGETS if statistics.median(len(lead_text(t).split()) for t in made[b]) <= MAX_MEDIAN_WORDS]
        best = max(
            fits or BUDGETS[:1],
            key=lambda b: statistics.fmean(
                target(score_answer(rows[i][1].question_id, rows[i][1].question, rows[i][2].answer, t, []))
                for i, t in zip(which, made[b])
            ),
        )
        return LeadModel(w, best)

    everyone = list(range(len(rows)))
    whole = fitted(everyone)
    held = [""] * len(rows)
    for fold in range(FOLDS):
        model = fitted([i for i in everyone if folds[i] != fold])
        test = [i for i in everyone if folds[i] == fold]
        print(f"- fold {fold}: budget {model.budget}")
        for i, t in zip(test, leads(model, test)):
            held[i] = t
    inside = leads(whole, everyone)
    docs = [i for i in everyone if rows[i][0].startswith("docs")]
    code = [i for i in everyone if not rows[i][0].startswith("docs")]
    weights = dict(zip(FEATURES, (round(w, 4) for w in whole.weights)))
    print(f"\nbudget (all questions): {whole.budget}; weights: {weights}")
    print(f"\n{HEAD}")
    for label, texts in (("key line (before)", old), ("units, in sample", inside), ("units, out of fold", held)):
        for part, which in (("all", everyone), ("docs", docs), ("code", code)):
            print(measure(f"{label}, {part}", [(rows[i], texts[i]) for i in which], reader))
    if "--model" in argv:  # the whole answer's lead: the units, then the model's supported sentences
        n = int(argv[argv.index("--model") + 1])
        some = [i for i in everyone if rows[i][1].question_id in {r.question_id for _, r, _ in load_sets(n)}]
        sample = [rows[i] for i in some]
        raw, _, seconds = generate("grounded", generator, sample, lambda r: prompts[r.question_id])
        print(f"\nwith the model's text, the first {n} questions of each set ({seconds:.2f} s per generated question):")
        print(f"\n{HEAD}")
        for label, texts in (("key line (before)", old), ("units, in sample", inside), ("units, out of fold", held)):
            made = {
                i: lead_of(
                    grounded_answer(
                        raw[rows[i][1].question_id], replace(prompts[rows[i][1].question_id], lead=texts[i])
                    ).answer
                )
                for i in some
            }
            for part, which in (
                ("all", some),
                ("docs", [i for i in some if i in docs]),
                ("code", [i for i in some if i in code]),
            ):
                print(measure(f"{label} + model, {part}", [(rows[i], made[i]) for i in which], reader))
    if "--write" in argv:
        data = {"features": list(FEATURES), "weights": list(whole.weights), "budget": whole.budget}
        WEIGHTS_FILE.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {WEIGHTS_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
