"""Issue 45's latency: what the model's text adds to an answer, and what each way of asking for it costs.

Run from the project root after ``make index`` and ``search_dataset`` of the four answered sets (docs and
code, public and dev, k = 10, into data/output/search_results)::

    .venv/bin/python benches/answer_speed.py score [--limit N]     # every variant's answers, scored
    .venv/bin/python benches/answer_speed.py time [questions] [reps]  # generation seconds per question

Variants (the ``lead`` grounding of every one; the lead and quoted key lines are the same in all):

- ``full``: the grounded prompt (key lines and the whole context, ~480 tokens), 80 new tokens (before);
- ``short``: the prompt of :func:`fastrag.answering.grounding.short_prompt` when the tree has it (the lead
  and key lines alone), 48 new tokens;
- ``none``: no generation: the lead and the quoted key lines.

``score`` generates each variant's raw text once per question on the continuous-batching pipeline
(cached in data/bench/answer_speed/, so a rerun only re-scores) and prints, per variant and for all
questions and docs alone, ``evaluate_answers``' key-term and word recall, the median words, the support
rate (:func:`fastrag.answering.grounding.audit_answer`) and how many answers show a unit of the model's text.
``time`` generates the first ``questions`` docs-public prompts of ``full`` and ``short`` on one loaded
batched pipeline, the variants alternating ``reps`` times (each on a fresh pipeline: the prefix cache would
otherwise turn a repeated prompt into a hit), and prints seconds per question and the load average.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from answer_variants import load_sets, total

from fastrag.answering import grounding
from fastrag.answering.answer import block_similarity, prompt_sources
from fastrag.answering.generator import Generator, load_generator
from fastrag.answering.grounding import audit_answer, grounded_answer, grounded_prompt
from fastrag.answering.model_files import resolve_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Prompt, SpanReader
from fastrag.config import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS
from fastrag.evaluation.answer_metrics import score_answer, summarize
from fastrag.schemas import MinimalSearchResults

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "data/bench/answer_speed"
#: The short variant's new tokens: one sentence and its citation.
SHORT_TOKENS = 48


def prompts_of(
    variant: str, generator: Generator, rows: Sequence[MinimalSearchResults], reader: SpanReader
) -> dict[str, Prompt]:
    """The prompt of every question for ``variant`` (``full`` or ``short``)."""
    similarity = block_similarity()
    count, render = generator.count_tokens, generator.render
    out: dict[str, Prompt] = {}
    for r in rows:
        sources = prompt_sources(r.retrieved_sources)
        full = grounded_prompt(r.question, sources, count, render, DEFAULT_PROMPT_BUDGET, reader, similarity)
        out[r.question_id] = grounding.short_prompt(full, render, count) if variant == "short" else full
    return out


def generated(variant: str, generator: Generator, prompts: dict[str, Prompt], tokens: int) -> dict[str, str]:
    """Raw model text per question id, cached on disk per variant."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"raw_{variant}.json"
    raw: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
    todo = [q for q in prompts if q not in raw and prompts[q].text]
    for i, text in generator.generate_iter((prompts[q].text for q in todo), tokens):
        raw[todo[i]] = text
    path.write_text(json.dumps(raw))
    return raw


def score(argv: Sequence[str]) -> None:
    """Score every variant (module docstring)."""
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
    rows = load_sets(limit)
    reader = SpanReader()
    generator = load_generator(resolve_model("smollm2"), max_batch=DEFAULT_BATCH_SIZE)
    results = [r for _, r, _ in rows]
    variants = ["full", "none"] + (["short"] if hasattr(grounding, "short_prompt") else [])
    head = (
        "| variant | key-term recall | word recall | median words | support rate | model text shown | prompt tokens |"
    )
    print(f"{head}\n|---|---|---|---|---|---|---|", flush=True)
    full_prompts = prompts_of("full", generator, results, reader)
    for variant in variants:
        prompts = full_prompts if variant != "short" else prompts_of("short", generator, results, reader)
        if variant == "none":
            raw = {q: "" for q in prompts}
        else:
            raw = generated(variant, generator, prompts, DEFAULT_MAX_NEW_TOKENS if variant == "full" else SHORT_TOKENS)
        for name, keep in (("all", lambda s: True), ("docs", lambda s: s.startswith("docs"))):
            scores, audits, shown = [], [], 0
            for set_name, r, ref in rows:
                if not keep(set_name):
                    continue
                # the lead, key lines and excerpts are the full prompt's in every variant
                done = grounded_answer(raw.get(r.question_id, ""), full_prompts[r.question_id])
                none = grounded_answer("", full_prompts[r.question_id])
                shown += done.answer != none.answer
                scores.append(score_answer(r.question_id, r.question, ref.answer, done.answer, r.retrieved_sources))
                audits.append(audit_answer(done.answer, reader, r.question))
            s = summarize(scores)
            tokens = statistics.median(prompts[r.question_id].tokens for set_, r, _ in rows if keep(set_))
            print(
                f"| {variant}, {name} ({len(scores)}) | {s.key_recall:.3f} | {s.word_recall:.3f} | "
                f"{s.median_words:g} | {total(audits).support_rate:.3f} | {shown} | {tokens:g} |",
                flush=True,
            )


def timing(argv: Sequence[str]) -> None:
    """Seconds of generation per question, ``full`` against ``short``, alternating (module docstring)."""
    words = [a for a in argv if not a.startswith("--")]
    n = int(words[0]) if words else 30
    reps = int(words[1]) if len(words) > 1 else 2
    rows = [r for name, r, _ in load_sets(None) if name == "docs_public"][:n]
    reader = SpanReader()
    spec = resolve_model("smollm2")
    probe = load_generator(spec, max_batch=DEFAULT_BATCH_SIZE)
    variants = ["full"] + (["short"] if hasattr(grounding, "short_prompt") else [])
    prompts = {v: prompts_of(v, probe, rows, reader) for v in variants}
    del probe
    tokens = {"full": DEFAULT_MAX_NEW_TOKENS, "short": SHORT_TOKENS}
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    print(json.dumps({"questions": n, "load_avg_before": os.getloadavg()}), flush=True)
    for rep in range(reps):
        for variant in variants if rep % 2 == 0 else variants[::-1]:
            generator = load_generator(spec, max_batch=DEFAULT_BATCH_SIZE)
            texts = [p.text for p in prompts[variant].values() if p.text]
            started = time.perf_counter()
            for _ in generator.generate_iter(texts, tokens[variant]):
                pass
            seconds[variant].append((time.perf_counter() - started) / len(texts))
            print(json.dumps({"variant": variant, "rep": rep, "s_per_q": round(seconds[variant][-1], 3),
                              "load_avg": os.getloadavg()}), flush=True)  # fmt: skip
            del generator
    print(json.dumps({v: round(statistics.median(s), 3) for v, s in seconds.items()}), flush=True)


COMMANDS: dict[str, Callable[[Sequence[str]], None]] = {"score": score, "time": timing}

if __name__ == "__main__":
    COMMANDS[sys.argv[1] if len(sys.argv) > 1 else "score"](sys.argv[2:])
