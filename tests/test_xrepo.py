"""The xrepo benchmark's scorer (``benches/xrepo_score.py``) on hand-built cases, and one small end-to-end run.

The scoring rule is the benchmark's (``../shared/xrepo/README.md``): suffix path match on ``/`` boundaries
either way, inclusive line overlap, the first covering result's rank, binary gains a result shares between
the targets it first covers, ideal DCG of ``min(10, targets)`` gains with uncovered targets counted.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

from conftest import SHARED, shared_path

BENCHES = Path(__file__).resolve().parents[1] / "benches"
if str(BENCHES) not in sys.path:
    sys.path.append(str(BENCHES))  # the bench scripts import each other by module name
xs = importlib.import_module("xrepo_score")
Span, Target, Task = xs.Span, xs.Target, xs.Task

#: The discount of rank i (1-based).
D = {i: 1 / math.log2(i + 1) for i in range(1, 12)}


def task(*targets: object) -> object:
    """A task of hand-made targets (a path string or a ``(path, start, end)`` triple)."""
    parsed = tuple(Target(t[0], t[1], t[2]) if isinstance(t, tuple) else Target(str(t)) for t in targets)
    return Task("repo", "python", "semantic", "q", parsed)


def result(repo: str, lang: str, category: str, ndcg: float) -> object:
    """A scored task of one repository with only its NDCG set (what the summaries read)."""
    return xs.TaskResult(Task(repo, lang, category, "q", (Target("a.py"),)), ndcg, (None,), ())


def spans(*paths: str) -> list[object]:
    """Whole-file-ish results (lines 1-10) of these paths, best first."""
    return [Span(p, 1, 10) for p in paths]


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("result", "target", "expected"),
    [
        ("a/b.py", "a/b.py", True),
        ("src/a/b.py", "a/b.py", True),  # the result's path ends with the target's
        ("b.py", "a/b.py", True),  # the target's ends with the result's: targets relative to another root
        ("xa/b.py", "a/b.py", False),  # not on a `/` boundary
        ("a/b.py", "xa/b.py", False),  # nor the other way
        ("a/b.pyx", "a/b.py", False),
        ("a/b.py", "a/b", False),
        ("./src/a/b.py", "a/b.py", True),
        ("src\\a\\b.py", "a/b.py", True),
        ("", "a/b.py", False),
    ],
)
def test_path_matches_suffix_on_slash_boundaries_either_way(result: str, target: str, expected: bool) -> None:
    assert xs.path_matches(result, target) is expected


# --------------------------------------------------------------------------- lines


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        (20, 30, True),  # shares the target's last line
        (21, 30, False),  # starts just after it
        (1, 10, True),  # shares its first line
        (1, 9, False),  # ends just before it
        (12, 15, True),  # inside
        (1, 99, True),  # around
        (15, 15, True),  # one line inside
    ],
)
def test_line_target_needs_inclusive_overlap(first: int, last: int, expected: bool) -> None:
    target = Target("a/b.py", 10, 20)
    assert xs.covers(Span("src/a/b.py", first, last), target) is expected
    assert xs.covers(Span("src/a/c.py", first, last), target) is False  # lines of another file never count


def test_file_target_is_covered_by_any_span_of_its_file() -> None:
    assert xs.covers(Span("a/b.py", 500, 501), Target("a/b.py"))
    assert not xs.covers(Span("a/c.py", 1, 1), Target("a/b.py"))


def test_char_span_lines_are_one_based_inclusive() -> None:
    text = "ab\ncd\n\nef"
    starts = [0, 3, 6, 7]
    assert xs.char_span_lines(starts, 0, 2) == (1, 1)
    assert xs.char_span_lines(starts, 0, 3) == (1, 1)  # the end is exclusive: the newline is line 1's
    assert xs.char_span_lines(starts, 0, 4) == (1, 2)
    assert xs.char_span_lines(starts, 3, len(text)) == (2, 4)
    assert xs.char_span_lines(starts, 7, 7) == (4, 4)  # empty: the line of its start


# --------------------------------------------------------------------------- NDCG


def test_first_result_covering_the_only_target_scores_one() -> None:
    assert xs.ndcg_at_10(spans("a.py", "b.py"), task("a.py")) == pytest.approx(1.0)


def test_rank_is_that_of_the_first_covering_result() -> None:
    t = task("b.py")
    assert xs.target_ranks(spans("a.py", "b.py", "c.py", "b.py"), t) == (2,)
    assert xs.ndcg_at_10(spans("a.py", "b.py", "c.py", "b.py"), t) == pytest.approx(D[2])


def test_two_targets_first_covered_by_one_result_share_one_gain() -> None:
    t = task(("a.py", 1, 5), ("a.py", 6, 9))  # both inside the one span a.py:1-10
    assert xs.target_ranks(spans("a.py"), t) == (1, 1)
    assert xs.ndcg_at_10(spans("a.py"), t) == pytest.approx(1 / (D[1] + D[2]))


def test_ideal_uses_at_most_ten_targets() -> None:
    names = [f"f{i}.py" for i in range(12)]
    t = task(*names)
    assert xs.ndcg_at_10(spans(*names[:10]), t) == pytest.approx(1.0)  # 10 of 12 found in 10 slots: perfect
    assert xs.ndcg_at_10(spans(*names[:9], "other.py"), t) == pytest.approx(
        sum(D[i] for i in range(1, 10)) / sum(D[i] for i in range(1, 11))
    )


def test_uncovered_targets_count_in_the_ideal() -> None:
    t = task("a.py", "not_indexed.py", "other/missing.py")
    assert xs.target_ranks(spans("a.py", "b.py"), t) == (1, None, None)
    assert xs.ndcg_at_10(spans("a.py", "b.py"), t) == pytest.approx(1 / (D[1] + D[2] + D[3]))


def test_results_past_the_tenth_do_not_count() -> None:
    t = task("a.py")
    ranked = spans(*[f"x{i}.py" for i in range(10)], "a.py")
    assert xs.target_ranks(ranked, t) == (None,)
    assert xs.ndcg_at_10(ranked, t) == 0.0
    assert xs.ndcg_at_10([], t) == 0.0


def test_summary_means_repositories_then_languages() -> None:
    summary = xs.summarize(
        [
            result("r1", "go", "symbol", 1.0),
            result("r1", "go", "semantic", 0.0),
            result("r2", "go", "symbol", 1.0),
            result("r3", "c", "semantic", 0.25),
        ]
    )
    assert summary.repos == {"r1": 0.5, "r2": 1.0, "r3": 0.25}
    assert summary.languages == {"c": 0.25, "go": 0.75}  # mean of its repositories, not of its tasks
    assert summary.categories == {"semantic": 0.125, "symbol": 1.0}  # mean over tasks
    assert summary.mean == pytest.approx(1.75 / 3)


# --------------------------------------------------------------------------- the benchmark's files

XREPO = SHARED / "xrepo"


@pytest.fixture()
def _needs_xrepo() -> None:
    """The benchmark's files in ``../shared/xrepo``: skipped without them, a failure in CI (:func:`shared_path`)."""
    shared_path("xrepo/repos.json")


@pytest.mark.usefixtures("_needs_xrepo")
def test_load_tasks_reads_every_annotation() -> None:
    repos = xs.load_repos(XREPO)
    tasks = xs.load_tasks(XREPO)
    assert len(repos) == 41 and len({r.language for r in repos}) == 19
    assert len(tasks) == 813
    assert {t.category for t in tasks} <= {"semantic", "architecture", "symbol"}
    assert all(t.targets for t in tasks)
    raw = json.loads((XREPO / "annotations" / "fastapi.json").read_text())
    first = next(t for t in tasks if t.repo == "fastapi")
    assert first.query == raw[0]["query"]
    assert [x.path for x in first.targets] == raw[0]["relevant"] + raw[0]["secondary"]


def test_question_form_asks_any_query_as_a_direct_question() -> None:
    from fastrag.retrieval.evidence import asks_directly

    run = importlib.import_module("xrepo_run")
    for query in ("Depends", "middleware stack and CORS", "how routes are matched?"):
        assert not asks_directly(query)
        assert asks_directly(run.question_form(query))
    assert run.question_form("how are routes matched?").count("?") == 1


@pytest.mark.usefixtures("_needs_xrepo")
def test_end_to_end_on_the_smallest_tree(tmp_path: Path) -> None:
    """Unpack, index and search the smallest repository; results are repository paths and lines of real files."""
    run = importlib.import_module("xrepo_run")
    repos = [r for r in xs.load_repos(XREPO) if r.name == "axios"]
    trees = run.unpack_trees(repos, XREPO, tmp_path / "trees")
    stamp = (tmp_path / "trees" / "axios.json").stat().st_mtime_ns
    assert run.unpack_trees(repos, XREPO, tmp_path / "trees") == trees  # unchanged tarball: kept, not unpacked
    assert (tmp_path / "trees" / "axios.json").stat().st_mtime_ns == stamp
    builds = run.build_indexes(repos, trees, tmp_path / "index", progress=False)
    assert builds["axios"].error is None and builds["axios"].seconds is not None
    reused = run.build_indexes(repos, trees, tmp_path / "index", reuse=True, progress=False)
    assert reused["axios"].seconds is None  # same tree, same build: kept

    latencies: list[float] = []
    results = run.run_fastrag(repos, tmp_path / "index", trees=tmp_path / "trees", xrepo_dir=XREPO, latencies=latencies)
    assert len(results) == len(xs.load_tasks(XREPO, repos)) == len(latencies)
    timed = run.time_in_process(repos, trees, "none", progress=False)
    assert list(timed) == ["axios"] and timed["axios"] > 0.0  # built in-process, the warm-up build not counted
    tree = trees["axios"]
    for r in results:
        assert 0.0 <= r.ndcg <= 1.0 and r.spans
        for s in r.spans:
            assert s.path.startswith("lib/"), s  # a path in the repository, under its benchmark root
            assert 1 <= s.first_line <= s.last_line <= len((tree / s.path).read_text().splitlines()) + 1
    assert xs.summarize(results).mean > 0.3  # path or line conversion broken: near 0

    def nothing(retriever: object, queries: list[str], k: int) -> list[list[object]]:
        return [[] for _ in queries]

    blank = run.run_fastrag(repos, tmp_path / "index", search=nothing, trees=tmp_path / "trees", xrepo_dir=XREPO)
    assert [r.ndcg for r in blank] == [0.0] * len(results)  # the ranker is the one passed


# --------------------------------------------------------------------------- the report


def test_report_tables_per_repository_language_and_category() -> None:
    cli = importlib.import_module("xrepo")
    repos = [xs.Repo("r1", "go", None), xs.Repo("r2", "go", "src"), xs.Repo("r3", "ruby", "lib")]

    run = cli.Run(repos)
    run.results["fastrag"] = [
        result("r1", "go", "symbol", 1.0),
        result("r2", "go", "semantic", 0.5),
        result("r3", "ruby", "semantic", 0.0),
    ]
    run.results["semble"] = [
        result("r1", "go", "symbol", 0.5),
        result("r2", "go", "semantic", 0.5),
        result("r3", "ruby", "semantic", 1.0),
    ]
    run.index_s = {"fastrag": {"r1": 1.0, "r2": 2.0, "r3": 0.5}, "semble": {"r1": 3.0, "r2": 4.0, "r3": 5.0}}
    run.latency_s = {"fastrag": [0.001, 0.002, 0.003], "semble": [0.01, 0.02, 0.03]}
    run.errors = {"r3": "fastrag: error: no indexable files under /x/lib (looked for .py)"}
    run.in_process_s = {"docs": {"r1": 2.5, "r2": 4.5}, "none": {"r1": 0.5, "r2": 3.5}}
    run.question_latency_s = [0.004, 0.005, 0.006]
    figs = cli.figures(run, {"r1": 0.9, "r2": 0.7, "r3": 0.8}, wall_s=12.0)
    assert figs["mean"] == {
        "fastrag": pytest.approx(0.5),
        "semble": pytest.approx(2 / 3),
        "published": pytest.approx(0.8),
    }
    assert figs["languages"]["go"] == {"repos": 2, "fastrag": 0.75, "semble": 0.5, "published": pytest.approx(0.8)}
    assert figs["categories"]["semantic"]["tasks"] == 2
    assert figs["index_s"] == {"fastrag": 3.5, "semble": 12.0}
    assert figs["index_s_indexed"] == {"fastrag": 3.0, "semble": 7.0}  # r3 failed to index: left out of this pair
    assert figs["in_process_s"] == {"docs": 7.0, "none": 4.0}
    assert figs["in_process_not_slower"] == {"docs": 1, "none": 2}  # r2 with vectors: 4.5 s against semble's 4.0
    text = cli.report_text(figs, full=True)
    assert text.startswith(cli.SECTION + "\n")
    assert "| **mean NDCG@10 over 3 repositories** | **0.500** | **0.667** | 0.800 |" in text
    assert "| r3 | ruby | 0.000 (no indexable files) | 1.000 | 0.800 | 0.50 / — / — / 5.00 |" in text
    assert "| r2 | go | 0.500 | 0.500 | 0.700 | 2.00 / 4.50 / 3.50 / 4.00 |" in text
    assert "with docs vectors, sum · repositories no slower than semble | 7.00 s · 1 of 3 |" in text
    assert "asked as a full question" in text and "| 5.0 / 6.0 ms |" in text
    assert "| go | 2 | 0.750 | 0.500 | 0.800 |" in text
    assert "query latency p50, in-process, one query at a time | 2.0 ms | 20.0 ms |" in text
    assert not cli.report_text(figs, full=False).startswith(cli.SECTION)  # a partial run is never the section
