"""Load on the HTTP server: 1000 ``GET /search`` requests, 8 at a time, over loopback to a real uvicorn server.

Run from the project root after ``make index``::

    uv run --no-sync python benches/server_load.py                 # both indexes, writes benches/RESULTS.md
    uv run --no-sync python benches/server_load.py --live-only     # only the live index (data/processed)
    uv run --no-sync python benches/server_load.py --no-write      # print only

For each index, ``python -m fastrag serve --port 0`` is started in its own process and driven by 8 client
threads, each with one keep-alive connection (``http.client``). Two passes of the same 1000 requests:

- **cold**: every request is a cache miss: the 200 public questions (docs + code) × k in {10, 9, 8, 7, 6},
  shuffled with a fixed seed, so no (query, k) pair repeats and the LRU cache never answers;
- **cached**: 1000 requests cycling over the last 200 keys of the cold pass, all still in the LRU cache
  (256 entries), so every one is answered from it.

Indexes: the live ``data/processed`` (the default index: ``hybrid`` embeds the query and fuses BM25 with
the vectors of the docs chunks) and a lexical one (``index --vectors none``, built once into
``benches/_work/server-index-lexical``, ~5 s), where ``hybrid`` searches BM25 alone. Latency is measured by the
client (request written to body read), so it includes HTTP, JSON, snippets and the thread hop; the client
runs on the same 2 cores as the server.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from common import replace_section, shown

from fastrag.config import DEFAULT_MODE, MODES

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benches/RESULTS.md"
SECTION = "## HTTP server load"
DATASETS = [ROOT / f"data/datasets/UnansweredQuestions/dataset_{name}_public.json" for name in ("docs", "code")]
LEXICAL_INDEX = ROOT / "benches/_work/server-index-lexical"
KS = (10, 9, 8, 7, 6)
SEED = 5
START_TIMEOUT_S = 120


@dataclass
class Pass:
    """One pass of requests: latencies (s), errors, cache hits, wall time."""

    name: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cache_hits: int = 0
    wall: float = 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-quantile of the latencies in milliseconds (nearest rank)."""
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]

    @property
    def throughput(self) -> float:
        """Completed requests per second."""
        return len(self.latencies) / self.wall if self.wall else 0.0


def questions() -> list[str]:
    """The public question texts (docs then code)."""
    out: list[str] = []
    for path in DATASETS:
        for q in json.loads(path.read_text())["rag_questions"]:
            out.append(q.get("question") or q["question_str"])
    return out


def requests_for(texts: Sequence[str], total: int) -> list[tuple[str, int]]:
    """``total`` distinct (query, k) pairs in a fixed random order."""
    pairs = [(q, k) for k in KS for q in texts]
    if len(set(pairs)) < total:
        raise SystemExit(f"only {len(set(pairs))} distinct requests available, {total} asked")
    random.Random(SEED).shuffle(pairs)
    return pairs[:total]


def start_server(index_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """``python -m fastrag serve --port 0`` on ``index_dir``; the process and its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrag", "serve", "--port", "0", "--index_dir", str(index_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not line or " on http://" not in line[0]:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r} {proc.communicate()[1][-2000:]}")
    return proc, line[0].strip().split(" on ", 1)[1]


def run_pass(name: str, address: str, pairs: Sequence[tuple[str, int]], mode: str, concurrency: int) -> Pass:
    """Send every request of ``pairs`` with ``concurrency`` keep-alive connections; collect latencies."""
    url = urlsplit(address)
    result = Pass(name)
    lock = threading.Lock()
    cursor = iter(enumerate(pairs))

    def worker() -> None:
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
        while True:
            with lock:
                item = next(cursor, None)
            if item is None:
                break
            _, (query, k) = item
            path = "/search?" + urlencode({"query": query, "k": k, "mode": mode})
            started = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                body = response.read()
                elapsed = time.perf_counter() - started
                ok = response.status == 200 and len(json.loads(body)["results"]) >= 1
            except (OSError, http.client.HTTPException, ValueError) as exc:
                conn.close()
                conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
                with lock:
                    result.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                if ok:
                    result.latencies.append(elapsed)
                    result.cache_hits += response.getheader("x-cache") == "hit"
                else:
                    result.errors.append(f"HTTP {response.status}: {body[:200]!r}")
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall = time.perf_counter() - started
    return result


def cpu_busy() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def ensure_lexical_index() -> Path:
    """``benches/_work/server-index-lexical``: the corpus indexed without vectors, brought up to date
    (incremental: a check when nothing changed, a rebuild when the chunking did)."""
    print(f"indexing into {LEXICAL_INDEX.relative_to(ROOT)} (index --vectors none, incremental) ...", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "fastrag", "index", "--vectors", "none", "--index_dir", str(LEXICAL_INDEX)],
        cwd=ROOT,
        check=True,
    )
    return LEXICAL_INDEX


def bench_index(label: str, index_dir: Path, total: int, concurrency: int, mode: str) -> list[tuple[str, Pass]]:
    """Cold and cached passes against one server; warms the server (and its embedder) first."""
    pairs = requests_for(questions(), total)
    proc, address = start_server(index_dir)
    try:
        warm = run_pass("warm-up", address, [(f"warm up {i} lora", 3) for i in range(20)], mode, 2)
        if warm.errors:
            raise SystemExit(f"warm-up failed: {warm.errors[0]}")
        cold = run_pass("cold (all cache misses)", address, pairs, mode, concurrency)
        recent = pairs[-200:]  # still in the LRU (256 entries): every request of this pass is a hit
        cached = run_pass(
            "cached (LRU hits)", address, (recent * (total // len(recent) + 1))[:total], mode, concurrency
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return [(label, cold), (label, cached)]


def section(rows: list[tuple[str, Pass]], total: int, concurrency: int, mode: str, load: str, foreign: float) -> str:
    """The ``## HTTP server load`` section of benches/RESULTS.md."""
    lines = [
        SECTION,
        "",
        (
            "Written by `benches/server_load.py` (a re-run replaces this section). "
            f"{total} `GET /search?mode={mode}` requests per pass, {concurrency} concurrent keep-alive connections "
            "over loopback to `python -m fastrag serve` (uvicorn, one process); client and server share the 2 cores. "
            "Latency is measured by the client, request sent to body read (JSON with snippets and line numbers)."
        ),
        "",
        (
            f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
            f"Python {platform.python_version()}; date {time.strftime('%Y-%m-%d %H:%M %Z')}"
        ),
        f"- load average before / after: {load}; other processes used {foreign:.2f} cores on average meanwhile",
        "",
        (
            "| index | pass | requests | errors | cache hits | throughput (req/s) "
            "| p50 (ms) | p90 (ms) | p99 (ms) | max (ms) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, p in rows:
        lines.append(
            f"| {label} | {p.name} | {len(p.latencies) + len(p.errors)} | {len(p.errors)} | {p.cache_hits} | "
            f"{p.throughput:.0f} | {p.percentile(0.50):.1f} | {p.percentile(0.90):.1f} | {p.percentile(0.99):.1f} | "
            f"{1000 * max(p.latencies):.1f} |"
        )
    lines += [
        "",
        (
            "Cold requests are 200 public questions × k ∈ {10, 9, 8, 7, 6}: 1000 distinct cache keys. "
            "On the live (default) index `hybrid` embeds every query "
            "(all-MiniLM-L6-v2 int8; the queries of concurrent searches are embedded together by "
            "`fastrag.retrieval.batching`, "
            'one call per query width, see "Query embedding on one request"), then fuses; on the lexical '
            "index it is BM25 alone."
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure, print, record."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--mode", default=DEFAULT_MODE, choices=MODES)
    parser.add_argument("--index-dir", type=Path, default=ROOT / "data/processed")
    parser.add_argument("--live-only", action="store_true", help="only the live index, not the lexical one")
    parser.add_argument("--no-write", action="store_true", help=f"do not update {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    load_before = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    busy, own, wall = cpu_busy(), os.times(), time.perf_counter()
    rows = bench_index(f"live (`{shown(args.index_dir)}`, default)", args.index_dir, args.requests,
                       args.concurrency, args.mode)  # fmt: skip
    if not args.live_only:
        rows += bench_index("lexical (`--vectors none`)", ensure_lexical_index(), args.requests,
                            args.concurrency, args.mode)  # fmt: skip
    now = os.times()
    mine = (now.user + now.system + now.children_user + now.children_system) - (
        own.user + own.system + own.children_user + own.children_system
    )
    foreign = max(0.0, cpu_busy() - busy - mine) / (time.perf_counter() - wall)
    load = f"{load_before} / " + "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    text = section(rows, args.requests, args.concurrency, args.mode, load, foreign)
    print(text)
    errors = sum(len(p.errors) for _, p in rows)
    if errors:
        print(f"{errors} errors, first: {next(p.errors[0] for _, p in rows if p.errors)}", file=sys.stderr)
    if not args.no_write:
        replace_section(RESULTS, SECTION, text)
        print(f"wrote {RESULTS.relative_to(ROOT)}", file=sys.stderr)
    if statistics.fmean(len(p.latencies) for _, p in rows) == 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
