"""``fastrag grep`` against ripgrep on vLLM: the same matching lines, and the time of each.

Usage: ``.venv/bin/python benches/grep.py [--rounds 3] [--no-write]`` (needs ``rg``: ``apt-get install ripgrep``)

Loads the live index (``data/processed``, built by ``make index``) and runs :data:`LITERALS` (``rg -F``) and
:data:`REGEXES` with both: fastrag's :func:`fastrag.retrieval.grep.grep` (the Rust ``regex`` crate in the
core, every indexed file) and ``rg -n`` given the same files on its command line. Their matching lines,
as ``(path, line)`` pairs, must be the same set. Times: fastrag's call in this process (files read from
the page cache as rg reads them), rg's whole process; each the median of ``--rounds`` rounds, the two taking
turns. Writes ``data/bench/results/grep.json`` and the ``## Exact search`` section of ``benches/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from common import RESULTS, ROOT
from report import header, loadavg, publish, say

from fastrag.config import DEFAULT_INDEX_DIR
from fastrag.indexing.generations import load_index
from fastrag.indexing.reading import IndexedFiles
from fastrag.retrieval.grep import grep
from fastrag.retrieval.lookup import IndexFiles

SECTION = "## Exact search"
LITERALS = (
    "LLMEngine", "def forward(", "import torch", "TODO", "SamplingParams", "lora_request", "cudaStream_t",
    "self.", "__init__", "return None", "async def", "@pytest.mark", "max_model_len", "tensor_parallel_size",
    "KV cache", "logger.info(", "raise ValueError", "#include", "::", "0x",
)  # fmt: skip
REGEXES = (
    r"def \w+_lora\w*\(", r"^class \w+\(nn\.Module\):", r"if __name__ == .__main__.:", r"[A-Z_]{10,}\s*=",
    r"torch\.\w+\(", r"\d+\.\d+\.\d+", r"^\s*#\s*TODO", r"(?i)deprecated", r"\w+Config\b", r"^import (os|sys)$",
)  # fmt: skip
#: More matching lines than any pattern here has.
LIMIT = 10_000_000


def ripgrep(rg: str, pattern: str, literal: bool, paths: list[str]) -> tuple[set[tuple[str, int]], float]:
    """``rg -n`` of ``pattern`` on ``paths``: its ``(path, line)`` pairs and wall seconds."""
    args = [rg, "--no-config", "-n", "--no-heading", "--with-filename", "--color", "never", "-a"]
    args += ["-F"] if literal else []
    started = time.perf_counter()
    proc = subprocess.run([*args, "-e", pattern, "--", *paths], capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"rg failed on {pattern!r}: {proc.stderr.decode(errors='replace')}")
    found: set[tuple[str, int]] = set()
    for raw in proc.stdout.decode("utf-8", errors="replace").splitlines():
        path, line, _ = raw.split(":", 2)
        found.add((path, int(line)))
    return found, seconds


def measure(rounds: int) -> dict[str, Any]:
    """Every pattern with both tools."""
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("rg is not installed: apt-get install ripgrep")
    files = IndexFiles(IndexedFiles(load_index(ROOT / DEFAULT_INDEX_DIR)))
    located = {str(files.locate(p)): p for p in files.paths}
    order = list(located)
    rows = []
    before = loadavg()
    for literal, patterns in ((True, LITERALS), (False, REGEXES)):
        for pattern in patterns:
            ours_s: list[float] = []
            rg_s: list[float] = []
            for _ in range(rounds):
                started = time.perf_counter()
                result = grep(files, pattern, regex=not literal, limit=LIMIT)
                ours_s.append(time.perf_counter() - started)
                theirs, seconds = ripgrep(rg, pattern, literal, order)
                rg_s.append(seconds)
            ours = {(str(files.locate(p)), line) for p, line, _ in result.matches}
            rows.append(
                {
                    "pattern": pattern,
                    "literal": literal,
                    "fastrag_lines": len(ours),
                    "rg_lines": len(theirs),
                    "same": ours == theirs,
                    "only_fastrag": len(ours - theirs),
                    "only_rg": len(theirs - ours),
                    "fastrag_ms": statistics.median(ours_s) * 1000,
                    "rg_ms": statistics.median(rg_s) * 1000,
                }
            )
            say(f"{pattern!r}: {len(ours)} / {len(theirs)} lines, same={ours == theirs}")
    return {"files": len(order), "rows": rows, "load_before": before, "load_after": loadavg(), "rounds": rounds}


def render(figures: dict[str, Any]) -> str:
    """The ``## Exact search`` section."""
    rows = figures["rows"]
    same = sum(r["same"] for r in rows)
    lines = [
        SECTION,
        "",
        (
            f"`fastrag grep` (the Rust `regex` crate in the core) against `rg -n` (ripgrep, Debian) on the "
            f"{figures['files']} indexed files of vLLM, given to both (`benches/grep.py`): **{same} of {len(rows)} "
            f"patterns give the same matching lines**. Times: median of {figures['rounds']} rounds; fastrag's "
            "call in-process, rg's whole process (its start included, ~2 ms)."
        ),
        "",
        header(),
        f"- load average before: {figures['load_before']}; after: {figures['load_after']}",
        "",
        "| pattern | kind | lines (fastrag / rg) | same | fastrag ms | rg ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        shown = r["pattern"].replace("|", "\\|")
        kind = "literal" if r["literal"] else "regex"
        lines.append(
            f"| `{shown}` | {kind} | {r['fastrag_lines']} / {r['rg_lines']} | {'yes' if r['same'] else 'NO'} | "
            f"{r['fastrag_ms']:.1f} | {r['rg_ms']:.1f} |"
        )
    total_ours = sum(r["fastrag_ms"] for r in rows)
    total_rg = sum(r["rg_ms"] for r in rows)
    lines += ["", f"All {len(rows)} patterns: fastrag {total_ours:.0f} ms, rg {total_rg:.0f} ms.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md alone")
    args = parser.parse_args()
    figures = measure(args.rounds)
    publish("grep", figures, SECTION, render(figures), write=not args.no_write)
    say(f"see {RESULTS.relative_to(ROOT)}")
    return 0 if all(r["same"] for r in figures["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
