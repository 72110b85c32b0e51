"""Answer benchmarks with SmolLM2 (the offline model): C1 latency, C2 batching, C3 prompt budget.

Run from the project root after ``make index`` and ``search_dataset`` on the public docs set::

    .venv/bin/python benches/answer_bench.py            # everything, prints a Markdown section
    .venv/bin/python benches/answer_bench.py c3         # only the prompt-budget measurement (~10 s)
    .venv/bin/python benches/answer_bench.py --write    # also replace `## Answers` in benches/RESULTS.md

- C1: ``python -m fastrag answer Q --k 5 --model smollm2`` wall time, in fresh processes (first one may
  convert the GGUF to IR once), and warm per-question latency one at a time (model loaded).
- C2: the 100 docs questions answered one at a time (``Generator.stream``) vs ``answer_dataset``'s
  batches (``generate`` on lists of prompts), same prompts, same model, run back to back; also the
  continuous-batching pipeline (``SchedulerConfig``) on a subset.
- C3: prompt length (model tokens) of every docs question with default settings, and whether the
  ground-truth evidence survives in the context (definition in :func:`key_lines`).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastrag.answer import DEFAULT_BATCH_SIZE, to_sources
from fastrag.generate import DEFAULT_MAX_NEW_TOKENS, Generator, LoadInfo, load_generator, resolve_model
from fastrag.prompt import DEFAULT_PROMPT_BUDGET, Prompt, SpanReader, build_prompt, terms

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "data/datasets/AnsweredQuestions/dataset_docs_public.json"
RESULTS = ROOT / "data/output/search_results/dataset_docs_public.json"
RESULTS_MD = ROOT / "benches/RESULTS.md"
QUESTION = "How do I load a LoRA adapter dynamically in vLLM?"


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    """The grading rule's intersection over union of two spans."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / ((a[1] - a[0]) + (b[1] - b[0]) - inter)


def key_lines(gt_text: str, reference_answer: str, n: int) -> list[str]:
    """The ``n`` lines of the ground-truth span that share the most terms with the reference answer.

    Terms are :func:`fastrag.prompt.terms` (identifier parts, light stemming, stopwords removed); ties go to
    the earlier line; lines sharing no term are not key lines. The evidence *survives* when every key
    line (stripped) occurs verbatim in the prompt's context.
    """
    wanted = set(terms(reference_answer))
    lines = [line.strip() for line in gt_text.splitlines() if line.strip()]
    scored = sorted(((len(set(terms(line)) & wanted), -i, line) for i, line in enumerate(lines)), reverse=True)
    return [line for score, _, line in scored[:n] if score > 0]


def load_questions() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    results = json.loads(RESULTS.read_text())["search_results"]
    truth = {q["question_id"]: q for q in json.loads(DATASET.read_text())["rag_questions"]}
    return results, truth


def prompts_for(generator: Generator, results: Sequence[dict[str, Any]], budget: int) -> list[Prompt]:
    from fastrag.models import MinimalSource

    reader = SpanReader()
    out = []
    for r in results:
        spans = [MinimalSource.model_validate(s) for s in r["retrieved_sources"]]
        out.append(
            build_prompt(r["question"], to_sources(spans), generator.count_tokens, generator.render, budget, reader)
        )
    return out


def c3(generator: Generator, budget: int = DEFAULT_PROMPT_BUDGET) -> dict[str, Any]:
    results, truth = load_questions()
    prompts = prompts_for(generator, results, budget)
    reader = SpanReader()
    eligible = kept1 = kept2 = 0
    for r, p in zip(results, prompts):
        gt = truth[r["question_id"]]["sources"][0]
        span = (gt["first_character_index"], gt["last_character_index"])
        found = any(
            s["file_path"] == gt["file_path"]
            and iou((s["first_character_index"], s["last_character_index"]), span) > 0.05
            for s in r["retrieved_sources"]
        )
        if not found:
            continue
        eligible += 1
        text = reader.text(gt["file_path"])[span[0] : span[1]]
        answer = truth[r["question_id"]]["answer"]
        kept1 += all(line in p.context for line in key_lines(text, answer, 1))
        kept2 += all(line in p.context for line in key_lines(text, answer, 2))
    tokens = [p.tokens for p in prompts]
    return {
        "budget": budget,
        "questions": len(prompts),
        "median_tokens": statistics.median(tokens),
        "max_tokens": max(tokens),
        "eligible": eligible,
        "key1": kept1 / eligible,
        "key2": kept2 / eligible,
    }


def c1_cli(runs: int = 3) -> list[float]:
    """Wall time of ``python -m fastrag answer`` in fresh processes (stdout not a terminal)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "fastrag", "answer", QUESTION, "--k", "5", "--model", "smollm2"],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
    return times


def c2(generator: Generator, n: int, batch: int, max_new_tokens: int) -> dict[str, Any]:
    """One at a time vs batched, back to back, on the same prompts."""
    results, _ = load_questions()
    prompts = [p.text for p in prompts_for(generator, results[:n], DEFAULT_PROMPT_BUDGET)]
    generator.generate_many(prompts[:2], 4)  # warm up
    single: list[float] = []
    started = time.perf_counter()
    for text in prompts:
        t = time.perf_counter()
        generator.stream(text, max_new_tokens)
        single.append(time.perf_counter() - t)
    one_by_one = time.perf_counter() - started
    started = time.perf_counter()
    for lo in range(0, n, batch):
        generator.generate_many(prompts[lo : lo + batch], max_new_tokens)
    batched = time.perf_counter() - started
    return {
        "n": n,
        "batch": batch,
        "single_total": one_by_one,
        "single_median": statistics.median(single),
        "batched_total": batched,
        "speedup": one_by_one / batched,
    }


def batching_modes(n: int, max_new_tokens: int) -> dict[str, float]:
    """Seconds for ``n`` prompts: default pipeline with batch sizes 8/16/32, and the CB pipeline."""
    import openvino_genai

    spec = resolve_model("smollm2")
    base = load_generator(spec)
    results, _ = load_questions()
    prompts = [p.text for p in prompts_for(base, results[:n], DEFAULT_PROMPT_BUDGET)]
    out: dict[str, float] = {}
    for batch in (8, 16, 32):
        started = time.perf_counter()
        for lo in range(0, n, batch):
            base.generate_many(prompts[lo : lo + batch], max_new_tokens)
        out[f"LLMPipeline.generate(list), batch {batch}"] = time.perf_counter() - started
    config = openvino_genai.SchedulerConfig()
    config.cache_size = 1
    config.max_num_seqs = 32
    config.dynamic_split_fuse = True
    cb = Generator(
        openvino_genai.LLMPipeline(str(spec.path), "CPU", scheduler_config=config), LoadInfo("cb", "ir", spec.path, 0)
    )
    started = time.perf_counter()
    cb.generate_many(prompts, max_new_tokens)
    out[f"SchedulerConfig pipeline, all {n} at once"] = time.perf_counter() - started
    return out


def section(report: dict[str, Any]) -> str:
    lines = ["## Answers", "", "Written by `benches/answer_bench.py --write` (a re-run replaces this section).", ""]
    lines.append(f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; load avg at start "
                 f"{report['loadavg']}; date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip
    lines.append(f"- model: SmolLM2-135M-Instruct Q4_1 (`--model smollm2`), IR saved under data/models; greedy, "
                 f"max_new_tokens {DEFAULT_MAX_NEW_TOKENS}, prompt budget {DEFAULT_PROMPT_BUDGET} tokens")  # fmt: skip
    for key, value in report.items():
        if key != "loadavg":
            lines.append(f"- {key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def write_section(text: str) -> None:
    current = RESULTS_MD.read_text() if RESULTS_MD.exists() else "# Benchmarks\n"
    start = current.find("\n## Answers\n")
    if start < 0:
        updated = current.rstrip("\n") + "\n\n" + text
    else:
        end = current.find("\n## ", start + 1)
        updated = current[: start + 1] + text + (current[end:] if end >= 0 else "")
    RESULTS_MD.write_text(updated)


def main(argv: list[str]) -> None:
    os.chdir(ROOT)
    what = [a for a in argv if not a.startswith("--")] or ["c1", "c2", "c3", "modes"]
    report: dict[str, Any] = {"loadavg": os.getloadavg()[0]}
    generator = load_generator(resolve_model("smollm2"))
    report["model load (in process)"] = f"{generator.info.seconds:.2f} s from {generator.info.kind}"
    if "c3" in what:
        report["C3 prompt budget"] = c3(generator)
        print(report["C3 prompt budget"], flush=True)
    if "c1" in what:
        report["C1 CLI wall s (fresh processes)"] = [round(t, 2) for t in c1_cli()]
        print(report["C1 CLI wall s (fresh processes)"], flush=True)
    if "c2" in what:
        del generator  # answer_dataset's own configuration: the continuous-batching scheduler
        generator = load_generator(resolve_model("smollm2"), max_batch=DEFAULT_BATCH_SIZE)
        report["C2 one-at-a-time vs batched"] = c2(generator, 100, DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS)
        print(report["C2 one-at-a-time vs batched"], flush=True)
    if "modes" in what:
        report["batching modes, 32 prompts (s)"] = {
            k: round(v, 1) for k, v in batching_modes(32, DEFAULT_MAX_NEW_TOKENS).items()
        }
        print(report["batching modes, 32 prompts (s)"], flush=True)
    text = section(report)
    print(text)
    if "--write" in argv:
        write_section(text)


if __name__ == "__main__":
    main(sys.argv[1:])
