"""Answer benchmarks with SmolLM2 (the offline model): C1 latency, C2 batching, C3 evidence kept in the prompt.

Run from the project root after ``make index`` (``make run`` also writes the search results)::

    .venv/bin/python benches/answer_bench.py c3            # evidence kept, prompt length (~20 s, no generation)
    .venv/bin/python benches/answer_bench.py semantic [reps]  # C3 and prompt time, words alone vs + embeddings
    .venv/bin/python benches/answer_bench.py profile       # one prompt: prefill vs decode
    .venv/bin/python benches/answer_bench.py warm [reps] [configs] [--max_new_tokens N]   # answer_dataset, old vs new
    .venv/bin/python benches/answer_bench.py cli           # `python -m fastrag answer` end to end, 3 fresh processes
    .venv/bin/python benches/answer_bench.py single        # C2: one at a time vs answer_dataset's batching

Every figure is printed as one JSON line with the load average before and after (the machine is shared:
compare figures of one run, not across runs).

**C1, warm latency per question in answer_dataset** (``warm``): the wall time ``answer_dataset`` spends
generating the answers of the 100 public docs questions with the model already loaded, divided by the
number of questions (prompts built and answers post-processed exactly as ``answer_dataset`` does). With
batching, that is the throughput cost of a question; the time until a given answer is ready also depends
on how many are generated with it, so the time to the first and to the median answer is printed too. Each
configuration runs on a freshly loaded pipeline (the scheduler's prefix cache would otherwise turn a
repeated prompt into a cache hit), alternating the order between repetitions.

**C3, the ground-truth span kept inside the context** (``c3``): the questions are retrieved afresh with the
default retriever (k = 10, as ``search_dataset``) unless ``--results FILE`` is given. A question is
*eligible* when a retrieved span matches its ground-truth span by the grading rule (same file, IoU > 0.05).
The span is *kept* when the characters actually shown to the model (the exact ranges of the excerpts,
gaps excluded) match the ground-truth span by the same rule. Two stricter measures are printed beside it:
the ground-truth span's key line (the line sharing most terms with the reference answer) lies inside the
shown ranges, and that key line occurs verbatim anywhere in the context (the measure used before).
Both counts are also split by the question's position (even, odd) to show whether a change holds on each
half. ``semantic`` prints C3 with the context chosen by the question's words alone and with the embedding
model too (``answer_dataset``'s default), then the time to build the 100 docs prompts each way, alternated
``reps`` times, and the embedding model's one-off load.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastrag.answering.answer import block_similarity, prompt_for
from fastrag.answering.citations import finish_answer
from fastrag.answering.generator import Generator, LoadInfo, load_generator
from fastrag.answering.model_files import resolve_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, Prompt, Similarity, SpanReader, terms
from fastrag.config import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS
from fastrag.schemas import MinimalSource

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "data/datasets/AnsweredQuestions/dataset_{kind}_public.json"
QUESTION = "How do I load a LoRA adapter dynamically in vLLM?"
K = 10


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    """The grading rule's intersection over union of two spans."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / ((a[1] - a[0]) + (b[1] - b[0]) - inter)


def shown_iou(shown: Sequence[tuple[int, int]], span: tuple[int, int]) -> float:
    """IoU of a set of disjoint shown ranges (one file) with a span: the grading rule on what was shown."""
    inter = sum(max(0, min(end, span[1]) - max(start, span[0])) for start, end in shown)
    union = (span[1] - span[0]) + sum(end - start for start, end in shown) - inter
    return inter / union if union else 0.0


def key_line(gt_text: str, reference_answer: str) -> str | None:
    """The line of the ground-truth span sharing the most terms with the reference answer (earliest on ties)."""
    wanted = set(terms(reference_answer))
    lines = [line.strip() for line in gt_text.splitlines() if line.strip()]
    scored = sorted(((len(set(terms(line)) & wanted), -i, line) for i, line in enumerate(lines)), reverse=True)
    return scored[0][2] if scored and scored[0][0] > 0 else None


def load(kind: str = "docs", results_file: Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Search results (fresh from the default retriever, or a saved file) and the ground truth by question id."""
    questions = json.loads(Path(str(DATASET).format(kind=kind)).read_text())["rag_questions"]
    truth = {q["question_id"]: q for q in questions}
    if results_file is not None:
        return json.loads(results_file.read_text())["search_results"], truth
    from fastrag.retrieval.retriever import Retriever, hits_to_sources

    hits = Retriever.open(ROOT / "data/processed").search_many([q["question"] for q in questions], K)
    results = [
        {"question_id": q["question_id"], "question": q["question"],
         "retrieved_sources": [s.model_dump() for s in hits_to_sources(h)]}
        for q, h in zip(questions, hits)
    ]  # fmt: skip
    return results, truth


_DEFAULT: Any = object()


def prompts_for(
    generator: Generator,
    results: Sequence[dict[str, Any]],
    budget: int = DEFAULT_PROMPT_BUDGET,
    similarity: Similarity | None = _DEFAULT,
) -> list[Prompt]:
    """The default prompt of every question, as ``answer_dataset`` builds it (``similarity``: its
    :func:`~fastrag.answering.answer.block_similarity` unless given; ``None`` chooses by the question's words alone)."""
    if similarity is _DEFAULT:
        similarity = block_similarity()
    reader = SpanReader()
    out = []
    for r in results:
        spans = [MinimalSource.model_validate(s) for s in r["retrieved_sources"]]
        out.append(prompt_for(generator, r["question"], spans, budget, reader, similarity))
    return out


def c3(
    generator: Generator,
    kind: str,
    results_file: Path | None,
    budget: int = DEFAULT_PROMPT_BUDGET,
    similarity: Similarity | None = _DEFAULT,
) -> dict[str, Any]:
    """Prompt length and whether the ground-truth span is kept in the context (module docstring)."""
    results, truth = load(kind, results_file)
    prompts = prompts_for(generator, results, budget, similarity)
    reader = SpanReader()
    eligible = kept = key_shown = key_verbatim = 0
    kept_halves, key_halves = [0, 0], [0, 0]
    missed: list[int | None] = []
    for position, (r, p) in enumerate(zip(results, prompts)):
        gt = truth[r["question_id"]]["sources"][0]
        path, span = gt["file_path"], (gt["first_character_index"], gt["last_character_index"])
        retrieved = [
            (s["file_path"], s["first_character_index"], s["last_character_index"]) for s in r["retrieved_sources"]
        ]
        ranks = [i for i, (f, a, b) in enumerate(retrieved) if f == path and iou((a, b), span) > 0.05]
        if not ranks:
            continue
        eligible += 1
        shown = sorted({part for e in p.excerpts if e.source.file_path == path for part in e.shown})
        hit = shown_iou(shown, span) > 0.05
        kept += hit
        kept_halves[position % 2] += hit
        if not hit:
            missed.append(ranks[0])
        text = reader.text(path)
        line = key_line(text[span[0] : span[1]], truth[r["question_id"]]["answer"])
        if line is not None:
            at = text.find(line, span[0], span[1])
            line_shown = any(start <= at and at + len(line) <= end for start, end in shown)
            key_verbatim += line in p.context
        else:
            line_shown = hit
            key_verbatim += hit
        key_shown += line_shown
        key_halves[position % 2] += line_shown
    tokens = [p.tokens for p in prompts]
    return {
        "set": kind, "retrieval": str(results_file) if results_file else "fresh, default retriever, k=10",
        "budget": budget, "questions": len(prompts),
        "median_tokens": statistics.median(tokens), "max_tokens": max(tokens),
        "eligible": eligible, "kept": kept, "kept_share": round(kept / eligible, 3),
        "key_line_shown": key_shown, "key_line_verbatim": key_verbatim,
        "kept_even_odd": kept_halves, "key_line_shown_even_odd": key_halves, "rank_of_missed": missed,
    }  # fmt: skip


def semantic(reps: int = 3) -> list[dict[str, Any]]:
    """C3 and the time to build answer_dataset's prompts: the question's words alone vs + the embedding model."""
    generator = load_generator(resolve_model("smollm2"))
    started = time.perf_counter()
    similarity = block_similarity()
    if similarity is None:
        raise SystemExit("no embedding model installed")
    similarity("warm up", ["the model loads on the first call"])
    rows: list[dict[str, Any]] = [{"embedding_model_load_s": round(time.perf_counter() - started, 3)}]
    print(json.dumps(rows[-1]), flush=True)
    for kind in ("docs", "code"):
        for name, chosen in (("words", None), ("words+embeddings", similarity)):
            rows.append({"context": name, **c3(generator, kind, None, similarity=chosen)})
            print(json.dumps(rows[-1]), flush=True)
    results, _ = load("docs")
    ways = [("words", None), ("words+embeddings", similarity)]
    for rep in range(reps):
        for name, chosen in ways if rep % 2 == 0 else ways[::-1]:
            load_before, started = os.getloadavg()[0], time.perf_counter()
            prompts_for(generator, results, similarity=chosen)
            wall = time.perf_counter() - started
            rows.append({"rep": rep, "context": name, "questions": len(results),
                         "prompt_ms_per_question": round(1000 * wall / len(results), 1),
                         "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)]})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def profile(
    generator: Generator, prompts: Sequence[Prompt], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
) -> dict[str, Any]:
    """Prompts one by one on the single-prompt pipeline: time to first token (prefill), time per generated token.

    The first prompt only warms up; every prompt is new to the pipeline (a repeated one would be a
    prefix-cache hit, not a prefill).
    """
    pipe = generator._pipe  # the bench reads OpenVINO's own performance metrics
    config = generator._config(max_new_tokens)
    pipe.generate([prompts[0].text], config)
    rows = []
    for prompt in prompts[1:]:
        metrics = pipe.generate([prompt.text], config).perf_metrics
        ttft, tpot = metrics.get_ttft().mean / 1000, metrics.get_tpot().mean / 1000
        rows.append({"prompt_tokens": metrics.get_num_input_tokens(), "new_tokens": metrics.get_num_generated_tokens(),
                     "ttft_s": round(ttft, 3), "prefill_tok_per_s": round(metrics.get_num_input_tokens() / ttft),
                     "decode_ms_per_token": round(tpot * 1000, 1),
                     "total_s": round(metrics.get_generate_duration().mean / 1000, 2)})  # fmt: skip
    return {"profile": rows}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _old_generator(path: Path) -> Generator:
    """answer_dataset before this change: LLMPipeline on SchedulerConfig(32 seqs, 1 GB, 256-token steps)."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.max_num_seqs = 32
    scheduler.cache_size = 1
    scheduler.dynamic_split_fuse = True
    pipeline = openvino_genai.LLMPipeline(str(path), "CPU", scheduler_config=scheduler)
    return Generator(pipeline, LoadInfo("old", "ir", path, 0))


def _list_generator(path: Path) -> Generator:
    """LLMPipeline with its own CPU scheduler settings, lists of prompts (no per-request control)."""
    import openvino_genai

    return Generator(openvino_genai.LLMPipeline(str(path), "CPU"), LoadInfo("list", "ir", path, 0))


def warm(reps: int, configs: Sequence[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> list[dict[str, Any]]:
    """answer_dataset's generation on the 100 public docs questions, per configuration, side by side.

    ``old:32`` — the previous answer_dataset (batches of 32 on a 256-token-step scheduler);
    ``list:N`` — LLMPipeline's own scheduler settings, ``generate`` on lists of N;
    ``new:N`` — this answer_dataset: :meth:`Generator.generate_iter` on the continuous-batching pipeline,
    N requests at once, loops ended early.
    """
    spec = resolve_model("smollm2")
    results, _ = load("docs", ROOT / "data/output/search_results/dataset_docs_public.json")
    base = load_generator(spec)
    prompts = prompts_for(base, results)
    texts = [p.text for p in prompts]
    del base
    first_answers: dict[str, list[str]] = {}
    rows = []
    for rep in range(reps):
        for config in configs if rep % 2 == 0 else list(reversed(configs)):
            kind, size = config.split(":")
            batch = int(size)
            gc.collect()
            if kind == "old":
                generator = _old_generator(spec.path)
            elif kind == "list":
                generator = _list_generator(spec.path)
            else:
                generator = load_generator(spec, max_batch=batch)
            generator.generate_many([generator.render([{"role": "user", "content": "Say hi."}])], 4)
            load_before, cpu, started = os.getloadavg()[0], _cpu(), time.perf_counter()
            ready: list[float] = []
            raw, answers = [""] * len(texts), [""] * len(texts)
            if kind == "new":
                for i, text in generator.generate_iter(texts, max_new_tokens):
                    raw[i], answers[i] = text, finish_answer(text, prompts[i].excerpts)
                    ready.append(time.perf_counter() - started)
            else:
                for lo in range(0, len(texts), batch):
                    for i, text in enumerate(generator.generate_many(texts[lo : lo + batch], max_new_tokens), lo):
                        raw[i], answers[i] = text, finish_answer(text, prompts[i].excerpts)
                    ready.extend([time.perf_counter() - started] * len(texts[lo : lo + batch]))
            wall, cpu = time.perf_counter() - started, _cpu() - cpu
            first_answers.setdefault(config, answers)
            rows.append({
                "rep": rep, "config": config, "questions": len(texts), "wall_s": round(wall, 1),
                "s_per_question": round(wall / len(texts), 3), "cpu_s_per_question": round(cpu / len(texts), 3),
                "first_answer_s": round(min(ready), 1), "median_answer_s": round(statistics.median(ready), 1),
                "generated_tokens_mean": round(statistics.mean(generator.count_tokens(raw)), 1),
                "saved_answers_equal_to": {
                    other: sum(a == b for a, b in zip(answers, kept)) for other, kept in first_answers.items()
                },
                "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            del generator
    return rows


def cli(runs: int = 3) -> list[float]:
    """Wall time of ``python -m fastrag answer`` in fresh processes (stdout not a terminal)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "fastrag", "answer", QUESTION, "--k", "5", "--model", "smollm2"],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        times.append(round(time.perf_counter() - started, 2))
        if done.returncode != 0:
            raise SystemExit(done.stderr)
    return times


def single(n: int = 100, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> dict[str, Any]:
    """C2: the same prompts one at a time (``Generator.stream``) vs answer_dataset's scheduler, back to back."""
    spec = resolve_model("smollm2")
    results, _ = load("docs", ROOT / "data/output/search_results/dataset_docs_public.json")
    one = load_generator(spec)
    texts = [p.text for p in prompts_for(one, results[:n])]
    one.stream(texts[0], 4)
    started = time.perf_counter()
    for text in texts:
        one.stream(text, max_new_tokens)
    one_by_one = time.perf_counter() - started
    del one
    batched = load_generator(spec, max_batch=DEFAULT_BATCH_SIZE)
    batched.generate_many(texts[:1], 4)
    started = time.perf_counter()
    batched.generate_many(texts, max_new_tokens)
    together = time.perf_counter() - started
    return {"n": n, "one_at_a_time_s": round(one_by_one, 1), "answer_dataset_s": round(together, 1),
            "speedup": round(one_by_one / together, 2)}  # fmt: skip


def uptime() -> str:
    """``uptime``'s line: the load average goes with every figure."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: list[str]) -> None:
    os.chdir(ROOT)
    results_file = Path(argv[argv.index("--results") + 1]) if "--results" in argv else None
    what = [a for a in argv if not a.startswith("--") and a != str(results_file)] or ["c3"]
    print(json.dumps({"uptime": uptime()}), flush=True)
    if what[0] == "c3":
        generator = load_generator(resolve_model("smollm2"))
        kinds = ("docs", "code") if results_file is None else ("code" if "code" in results_file.name else "docs",)
        for kind in kinds:
            print(json.dumps(c3(generator, kind, results_file)), flush=True)
    elif what[0] == "semantic":
        semantic(int(what[1]) if len(what) > 1 else 3)
    elif what[0] == "profile":
        generator = load_generator(resolve_model("smollm2"))
        results, _ = load("docs", ROOT / "data/output/search_results/dataset_docs_public.json")
        print(json.dumps(profile(generator, prompts_for(generator, results[:6]))), flush=True)
    elif what[0] == "warm":
        reps = int(what[1]) if len(what) > 1 else 2
        configs = what[2:] or ["old:32", f"new:{DEFAULT_BATCH_SIZE}"]
        tokens = int(argv[argv.index("--max_new_tokens") + 1]) if "--max_new_tokens" in argv else DEFAULT_MAX_NEW_TOKENS
        warm(reps, [c for c in configs if c != str(tokens)], tokens)
    elif what[0] == "cli":
        print(json.dumps({"cli_wall_s": cli()}), flush=True)
    elif what[0] == "single":
        print(json.dumps(single()), flush=True)
    print(json.dumps({"uptime": uptime()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
