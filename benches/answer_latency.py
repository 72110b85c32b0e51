"""One ``answer "<question>" --k 10`` end to end: where its seconds go, and the whole command side by side.

Run from the project root after ``make index`` (SmolLM2, the default model here)::

    .venv/bin/python benches/answer_latency.py stages [runs]        # the breakdown, one fresh process a run
    .venv/bin/python benches/answer_latency.py e2e [runs] [--baseline PKG:DIR]   # the whole command
    .venv/bin/python benches/answer_latency.py all [runs] [--baseline PKG:DIR]   # both; rewrites RESULTS.md
    .venv/bin/python benches/answer_latency.py loaded [runs] [--baseline PKG:DIR]  # per question, models loaded
    .venv/bin/python benches/answer_latency.py dataset [runs] [--baseline PKG:DIR] # answer_dataset of 100, wall

``stages`` times each step of one answer in a fresh process, one after the other (no overlap, so that each
is seen alone): interpreter start and imports, index open, retrieval, model choice, language model load
(and whether it came from the compiled-model cache), embedding model load, the prompt (key lines, context,
token counts), time to the first generated text (prefill), the rest of the generation (decode) and the
tokens generated. ``e2e`` runs ``python -m fastrag answer`` in fresh processes, timed from process start to
exit by this script, stdout not a terminal, and reads the model's load time from its status line; the CPU
time of the process (user + system, all threads) goes with the wall time, since it depends less on what
else runs on the machine.

``loaded`` loads the models once in a fresh process and answers the first 20 public docs questions one
at a time (retrieval, prompt, generation, grounding: what the server does per question); it prints the
median seconds per question (the first question left out). ``dataset`` times ``python -m fastrag
answer_dataset`` of the 100 public docs questions in a fresh process, model load included.

``--baseline PKG:DIR [--label NAME]`` adds another version of the package to ``e2e`` and ``stages``: ``PKG``
is put first on ``PYTHONPATH`` (a copy of ``python/`` at another commit, with the built ``_core`` beside it)
and the runs happen in ``DIR`` (a folder whose ``data/raw`` and ``data/processed`` point at this project's,
with its own ``data/models``, since versions may keep different model caches). The two alternate run by run; medians are
printed per version with the load average before and after (the machine is shared: compare figures of one
run, not across runs). ``all`` runs both and rewrites the "Answer latency" section of benches/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import machine, replace_section

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How do I enable prefix caching?"
K = 10

#: Child of ``stages``: each step of ``answer`` timed alone (``START`` is the parent's clock at spawn).
STAGES_CHILD = r"""
import json, os, sys, time
start = float(os.environ["FASTRAG_BENCH_START"])
marks = {"interpreter start": time.time() - start}
last = [time.perf_counter()]
def mark(name):
    now = time.perf_counter(); marks[name] = round(now - last[0], 3); last[0] = now
import fastrag.cli.commands
from fastrag.answering.answer import block_similarity, prompt_for
from fastrag.answering.model_files import choose_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, SpanReader
from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MAX_NEW_TOKENS
from fastrag.retrieval.retriever import Retriever, hits_to_sources
mark("imports")
retriever = Retriever.open(DEFAULT_INDEX_DIR); mark("index open")
question, k = sys.argv[1], int(sys.argv[2])
spans = hits_to_sources(retriever.search(question, k)); mark("retrieval")
reader = SpanReader(retriever.files.text)
spec = choose_model(None).spec; mark("model choice")
import openvino_genai; mark("openvino_genai import")
from fastrag.answering.generator import load_generator
generator = load_generator(spec); mark("language model load")
similarity = block_similarity()
if hasattr(similarity, "load"):
    similarity.load()
else:  # an older version loads it on its first call
    similarity("warm", ["up"])
mark("embedding model load")
prompt = prompt_for(generator, question, spans, DEFAULT_PROMPT_BUDGET, reader, similarity)
mark("prompt (key lines, context)")
first = []
began = time.perf_counter()
def on_text(piece):
    if not first:
        first.append(time.perf_counter())
raw = generator.stream(prompt.text, DEFAULT_MAX_NEW_TOKENS, on_text)
ended = time.perf_counter()
marks["prefill (to first text)"] = round(first[0] - began, 3) if first else None
marks["decode (rest)"] = round(ended - first[0], 3) if first else round(ended - began, 3)
marks["tokens generated"] = generator.count_tokens([raw])[0] if raw else 0
marks["prompt tokens"] = prompt.tokens
marks["compiled cache"] = getattr(generator.info, "compiled", "-")
marks["total in process"] = round(time.time() - start, 3)
print(json.dumps(marks))
"""


#: Child of ``loaded``: the models loaded once, then ``answer``'s steps for each question (retrieval, prompt,
#: generation, grounding), as the server runs them; seconds per question, the first (warm-up) left out.
LOADED_CHILD = r"""
import json, statistics, sys, time
from fastrag.answering.answer import generate_answer, load_models, prompt_for
from fastrag.answering.model_files import choose_model
from fastrag.answering.prompt import DEFAULT_PROMPT_BUDGET, SpanReader
from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MAX_NEW_TOKENS
from fastrag.evaluation.datasets import load_search_results
from fastrag.retrieval.retriever import Retriever, hits_to_sources
from pathlib import Path
questions = [r.question for r in load_search_results(Path(sys.argv[1])).search_results][: int(sys.argv[2])]
retriever = Retriever.open(DEFAULT_INDEX_DIR)
reader = SpanReader(retriever.files.text)
generator, similarity = load_models(choose_model(None).spec)
seconds, tokens = [], []
for question in questions:
    began = time.perf_counter()
    spans = hits_to_sources(retriever.search(question, 10))
    prompt = prompt_for(generator, question, spans, DEFAULT_PROMPT_BUDGET, reader, similarity)
    done = generate_answer(generator, prompt, DEFAULT_MAX_NEW_TOKENS, lambda piece: None)
    seconds.append(time.perf_counter() - began)
    tokens.append(prompt.tokens)
rest = seconds[1:] or seconds
print(json.dumps({"per_question_s": round(statistics.median(rest), 3), "mean_s": round(statistics.fmean(rest), 3),
                  "max_s": round(max(rest), 3), "prompt_tokens": statistics.median(tokens)}))
"""
#: The question set of ``loaded`` and ``dataset`` (its search results, written by ``search_dataset``).
RESULTS = ROOT / "data/output/search_results/dataset_docs_public.json"


def loaded(env: dict[str, str], cwd: Path, questions: int = 20) -> dict[str, Any]:
    """Seconds per question of ``answer``'s steps with the models already loaded (:data:`LOADED_CHILD`)."""
    return child_figures([LOADED_CHILD, str(RESULTS), str(questions)], env, cwd)


def child_figures(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """The JSON figures a child ``python -c`` prints last, with the load average after it; its stderr
    as the exit message when it fails."""
    done = subprocess.run(
        [sys.executable, "-c", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_avg"] = uptime()
    return result


def dataset(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Wall seconds of ``answer_dataset`` of the 100 public docs questions in a fresh process, model load included."""
    out = Path("/tmp") / f"fastrag-bench-answers-{os.getpid()}"
    load_before = uptime()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fastrag", "answer_dataset", "--student_search_results_path", str(RESULTS),
         "--save_directory", str(out)],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    (out / RESULTS.name).unlink(missing_ok=True)
    return {"wall_s": round(wall, 2), "load_avg": load_before}


def uptime() -> str:
    """The load average (1, 5, 15 minutes): it goes with every figure."""
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def versions(argv: list[str]) -> list[tuple[str, dict[str, str], Path]]:
    """``(label, environment, working directory)`` of this tree and of ``--baseline PKG:DIR`` if given."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = [("this tree", env, ROOT)]
    if "--baseline" in argv:
        pkg, where = argv[argv.index("--baseline") + 1].split(":", 1)
        label = argv[argv.index("--label") + 1] if "--label" in argv else "baseline"
        out.insert(0, (label, {**env, "PYTHONPATH": str(Path(pkg).resolve())}, Path(where).resolve()))
    return out


def end_to_end(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One ``python -m fastrag answer QUESTION --k 10`` in a fresh process: wall time and its status lines."""
    load_before = uptime()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fastrag", "answer", QUESTION, "--k", str(K)],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    loaded = re.search(r"loaded in ([\d.]+) s(?: \(([^)]*)\))?", done.stderr)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "model_load_s": float(loaded.group(1)) if loaded else None,
        "cache": loaded.group(2) if loaded and loaded.group(2) else "-",
        "load_avg": load_before,
    }


def stages(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """The breakdown of one answer (module docstring), in a fresh process."""
    child_env = {**env, "FASTRAG_BENCH_START": repr(time.time())}
    return child_figures([STAGES_CHILD, QUESTION, str(K)], child_env, cwd)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every numeric field of ``rows``."""
    keys = [k for k, v in rows[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out: dict[str, Any] = {}
    for key in keys:
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        out[key] = round(statistics.median(values), 3) if values else None
    return out


def alternate(what: str, runs: int, argv: list[str]) -> dict[str, list[dict[str, Any]]]:
    """``runs`` rounds of ``what`` (``e2e``, ``stages``, ``loaded`` or ``dataset``), the versions alternating;
    rows per version."""
    measure = {"e2e": end_to_end, "stages": stages, "loaded": loaded, "dataset": dataset}[what]
    print(json.dumps({"what": what, "question": QUESTION, "k": K, "load_avg_before": uptime()}), flush=True)
    table: dict[str, list[dict[str, Any]]] = {}
    for run in range(runs):
        order = versions(argv) if run % 2 == 0 else versions(argv)[::-1]
        for label, env, cwd in order:
            row = measure(env, cwd)
            table.setdefault(label, []).append(row)
            print(json.dumps({"version": label, "run": run, **row}), flush=True)
    for label, rows in table.items():
        print(json.dumps({"version": label, "runs": len(rows), "median": summary(rows)}), flush=True)
    print(json.dumps({"load_avg_after": uptime()}), flush=True)
    return table


#: Steps of ``stages`` that are counts, not seconds.
COUNTS = ("tokens generated", "prompt tokens")


def _cell(value: Any, step: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if step in COUNTS else f"{value:.2f}" if isinstance(value, float) else str(value)


def section(staged: dict[str, list[dict[str, Any]]], ended: dict[str, list[dict[str, Any]]], loads: str) -> str:
    """The "Answer latency" section of RESULTS.md: the breakdown and the whole command, per version."""
    labels = list(ended)
    head = "| | " + " | ".join(labels) + " |\n|---|" + "---|" * len(labels) + "\n"
    medians = {label: summary(rows) for label, rows in staged.items()}
    steps = [k for k in medians[labels[0]] if k != "total in process"]
    breakdown = "".join(
        f"| {step} | " + " | ".join(_cell(medians[label].get(step), step) for label in labels) + " |\n"
        for step in steps
    )
    breakdown += (
        "| **total in process** | "
        + " | ".join(f"**{_cell(medians[label].get('total in process'))}**" for label in labels)
        + " |\n"
    )
    rows = ""
    for name, key in (("wall, start to exit (s)", "wall_s"), ("CPU, user + system (s)", "cpu_s"),
                      ("model load, its status line (s)", "model_load_s")):  # fmt: skip
        cells = []
        for label in labels:
            values = sorted(r[key] for r in ended[label] if r.get(key) is not None)
            cells.append(f"**{statistics.median(values):.2f}** ({values[0]:.2f}–{values[-1]:.2f})" if values else "–")
        rows += f"| {name} | " + " | ".join(cells) + " |\n"
    runs = len(next(iter(ended.values())))
    return (
        "## Answer latency\n\n"
        f"`benches/answer_latency.py all` (`{QUESTION}`, `--k {K}`, default model → SmolLM2 from its IR, the\n"
        "compiled-model cache already made by an earlier run; versions alternating run by run; medians, range in\n"
        f"brackets). Load average (1 / 5 / 15 min): {loads}.\n\n"
        f"{machine()}\n\n"
        f"Whole command, `python -m fastrag answer` in a fresh process, {runs} runs per version:\n\n"
        f"{head}{rows}\n"
        "Where the time goes, each step alone in a fresh process (no overlap; seconds unless named; prefill\n"
        "includes the first inference's one-time cost, which `answer` now spends on a warm-up while the\n"
        "prompt is built):\n\n"
        f"{head}{breakdown}"
    )


def main(argv: list[str]) -> None:
    label = argv[argv.index("--label") + 1] if "--label" in argv else None
    words = [a for a in argv if not a.startswith("--") and ":" not in a and a != label]
    what = words[0] if words else "e2e"
    runs = int(words[1]) if len(words) > 1 else 5
    if what != "all":
        alternate(what, runs, argv)
        return
    before = uptime()
    staged = alternate("stages", runs, argv)
    ended = alternate("e2e", runs, argv)
    body = section(staged, ended, f"{before} → {uptime()}")
    replace_section(ROOT / "benches" / "RESULTS.md", "## Answer latency", body)


if __name__ == "__main__":
    main(sys.argv[1:])
