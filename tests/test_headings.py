"""Heading lines: where questions that ask *where* something is documented find their answer."""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag.indexing.builder import build_index
from fastrag.indexing.chunking.layers import heading_lines
from fastrag.indexing.generations import FORMAT_VERSION
from fastrag.indexing.records import IndexParams
from fastrag.retrieval import precision
from fastrag.retrieval.filters import SearchFilter
from fastrag.retrieval.query import analyse, asks_where
from fastrag.retrieval.retriever import Hit, Retriever, interleave

PROFILING = "# Profiling vLLM\n\nUse the torch profiler to trace a run.\n\n## Nsight Systems\n\nnsys profile ...\n"
NGINX = (
    "# Using Nginx\n\nA load balancer in front of servers.\n\n"
    "[](){ #nginx-build }\n\n## Build Nginx Container\n\nRun docker build for nginx.\n\n"
    "[](){ #vllm-build }\n\n## Build vLLM Container\n\nRun docker build for the vllm image.\n"
)
PROFILING_PATH = "repo/docs/contributing/profiling.md"
FILES = {
    "docs/contributing/profiling.md": PROFILING,
    "docs/deployment/nginx.md": NGINX,
    "docs/usage/other.md": "# Other\n\nNothing about the rest: profiling is mentioned once.\n",
    "pkg/profiler.py": "def profile_run(trace):\n    '''Profile a run with the torch profiler.'''\n    return trace\n",
}


def test_every_heading_line_alone_with_its_path() -> None:
    lines = heading_lines("docs/a.md", PROFILING)
    assert [PROFILING[c.start : c.end] for c in lines] == ["# Profiling vLLM", "## Nsight Systems"]
    assert [c.context for c in lines] == ["Profiling vLLM", "Profiling vLLM > Nsight Systems"]


def test_an_anchor_names_the_section_whose_heading_follows_it() -> None:
    lines = heading_lines("docs/nginx.md", NGINX)
    by_text = {NGINX[c.start : c.end]: c.context for c in lines}
    assert by_text["[](){ #vllm-build }"] == "Using Nginx > Build vLLM Container"
    assert by_text["[](){ #nginx-build }"] == "Using Nginx > Build Nginx Container"
    assert [c.start for c in lines] == sorted(c.start for c in lines)


def test_setext_rst_and_fenced_hashes() -> None:
    text = "Title\n=====\n\nSome text.\n\n```\n# not a heading\n```\n\nPart\n----\n"
    assert [text[c.start : c.end] for c in heading_lines("x.md", text)] == ["Title", "Part"]
    rst = "=====\nTitle\n=====\n\nIntro.\n\nSection\n-------\n\nBody.\n"
    assert [rst[c.start : c.end] for c in heading_lines("x.rst", rst)] == ["Title", "Section"]
    assert heading_lines("x.py", "# a comment, not a heading\n") == []
    assert heading_lines("x.md", "") == []


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["# A", "## B c", "text", "", "```", "[](){ #x }", "  ", "Title", "===", "é"])))
def test_heading_lines_are_single_trimmed_lines_inside_the_text(parts: list[str]) -> None:
    text = "\n".join(parts)
    for chunk in heading_lines("x.md", text):
        line = text[chunk.start : chunk.end]
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert "\n" not in line and line == line.strip()


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Which vLLM documentation page covers profiling vLLM's performance?", True),
        ("What anchor ID marks the vLLM container build section in the Nginx guide?", True),
        ("Which section of the troubleshooting guide addresses the device error?", True),
        ("Where in vLLM's guide on implementing a basic model are common questions answered?", True),
        ("What title heading appears on the landing page of the documentation?", True),
        ("In vLLM, which documentation page covers profiling?", True),
        ("For the Nginx guide, what anchor ID marks the container build section?", True),
        ("I build vLLM behind Nginx. Which section of the guide covers the container?", True),
        # the same typed without its question word, the place it asks for first
        ("vLLM documentation page covers profiling vLLM's performance", True),
        ("anchor ID marks the vLLM container build section in the Nginx guide", True),
        ("section of the troubleshooting guide addresses the device error", True),
        ("vLLM design document explains how prefix caching works", True),
        # a page, a section or an anchor in code is not a place in the documentation
        ("page of results in the paginator", False),
        ("section of the config parser", False),
        ("anchor of the regex engine", False),
        ("How do I build the vLLM container behind Nginx?", False),
        ("Which quant scheme does the Quark example in vLLM's docs use?", False),
        ("What does the section_size argument control?", False),
        ("In vLLM, how do I build the container behind Nginx?", False),
        ("The section_size argument: what does it control?", False),
        ("Where in the code are retries configured?", False),
        ("where in this repo is the session store", False),
        ("", False),
    ],
)
def test_questions_that_ask_where(question: str, asks: bool) -> None:
    assert asks_where(question) is asks


def test_interleave_alternates_then_drains() -> None:
    a = [Hit("a", i, i + 1, 1.0) for i in range(3)]
    b = [Hit("b", i, i + 1, 1.0) for i in range(1)]
    assert [h.file_path for h in interleave(a, b)] == ["a", "b", "a", "a"]
    assert list(interleave([], b)) == b


@pytest.fixture()
def retriever(tmp_path: Path) -> Retriever:
    repo = tmp_path / "repo"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    build_index(repo, tmp_path / "index", display_root="repo", progress=False)
    return Retriever.open(tmp_path / "index")


def test_a_where_question_gets_the_heading_line_first(retriever: Retriever) -> None:
    hits = retriever.search("Which documentation page covers profiling?", 4, "lexical")
    first = hits[0]
    assert (first.file_path, first.start, first.end) == ("repo/docs/contributing/profiling.md", 0, 16)
    assert len({(h.file_path, h.start, h.end) for h in hits}) == len(hits)
    anchor = retriever.search("What anchor ID marks the vLLM container build section?", 3, "lexical")
    text = NGINX[anchor[0].start : anchor[0].end]
    assert anchor[0].file_path == "repo/docs/deployment/nginx.md" and text in (
        "[](){ #vllm-build }",
        "## Build vLLM Container",
    )


def test_heading_lines_respect_the_search_filter(retriever: Retriever) -> None:
    question = "Which section covers profiling vLLM?"  # heading lines of both Markdown files match
    index = retriever.index

    def search(chosen: SearchFilter) -> list[Hit]:
        return retriever.search(question, 4, "lexical", allowed=chosen.mask(index))

    unfiltered = search(SearchFilter())
    assert (unfiltered[0].file_path, unfiltered[0].start, unfiltered[0].end) == (PROFILING_PATH, 0, 16)
    assert "repo/docs/deployment/nginx.md" in {h.file_path for h in unfiltered}
    # a heading line is allowed when the filter's predicate accepts its file
    paths = index.chunks.paths
    for chosen in (
        SearchFilter.parse("docs/deployment/**"),
        SearchFilter.parse(lang="python"),
        SearchFilter.parse("*.md"),
    ):
        mask = chosen.mask(index)
        assert mask is not None
        expected = [int(chosen.accepts(paths[f], paths[f].removeprefix("repo/"))) for f in index.headings.file]
        assert list(retriever.heading_mask(mask)) == expected
    deployment = search(SearchFilter.parse("docs/deployment/**"))
    assert deployment and {h.file_path for h in deployment} == {"repo/docs/deployment/nginx.md"}
    assert NGINX[deployment[0].start : deployment[0].end] == "## Build vLLM Container"  # its own heading line
    python = search(SearchFilter.parse(lang="python"))
    assert python and {h.file_path for h in python} == {"repo/pkg/profiler.py"}
    only = search(SearchFilter.parse("docs/contributing/*"))
    assert (only[0].file_path, only[0].start, only[0].end) == (PROFILING_PATH, 0, 16)
    assert {h.file_path for h in only} == {PROFILING_PATH}
    assert search(SearchFilter.parse("nothing/**")) == []
    with pytest.raises(ValueError, match="one byte per document"):
        retriever.heading_mask(b"\x01")


def test_a_heading_line_is_found_by_what_its_section_says(tmp_path: Path) -> None:
    """The question "Which page explains how to trace a run?" names nothing of the title "Profiling vLLM" but
    what its section says; indexed with the start of its section, the title line is the answer."""
    repo = tmp_path / "repo"
    filler = "Unrelated words about batching and scheduling. " * 12  # > 400 characters
    files = {**FILES, "docs/long.md": f"# Long Page\n\n{filler}\n\nThe zebra crossing appears only here.\n"}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    question = "Which page explains how to trace a run?"
    found = {}
    for body in (0, 400):
        build_index(
            repo, tmp_path / f"index{body}", IndexParams(heading_body=body), display_root="repo", progress=False
        )
        found[body] = Retriever.open(tmp_path / f"index{body}")
    first = found[400].search(question, 3, "lexical")[0]
    assert (first.file_path, first.start, first.end) == (PROFILING_PATH, 0, 16)
    without = found[0].search(question, 3, "lexical")[0]
    assert (without.file_path, without.start, without.end) != (PROFILING_PATH, 0, 16)
    # the section text stops at the next heading line ("nsys" belongs to "## Nsight Systems") ...
    nsys = found[400].search("Which section covers nsys?", 1, "lexical")[0]
    assert (nsys.file_path, files[nsys.file_path.removeprefix("repo/")][nsys.start : nsys.end]) == (
        PROFILING_PATH,
        "## Nsight Systems",
    )
    # ... and after ``heading_body`` characters: "zebra" lies beyond them, so no heading line has it
    zebra = found[400].index.headings.bm25.search_batch(["zebra crossing"], 3)[0]
    assert list(zebra[0]) == []


def test_other_questions_get_no_heading_line(retriever: Retriever) -> None:
    for hit in retriever.search("How do I profile a run with the torch profiler?", 5, "lexical"):
        assert "\n" in FILES[hit.file_path.removeprefix("repo/")][hit.start : hit.end]


def test_the_index_keeps_heading_lines_apart(retriever: Retriever) -> None:
    headings = retriever.index.headings
    assert len(headings) == 8 and headings.bm25.num_docs == 8  # 2 + 5 (3 headings, 2 anchors) + 1
    assert retriever.index.bm25.num_docs == retriever.index.definitions.num_docs == len(retriever.index.chunks)
    assert json.loads((retriever.index.path / "manifest.json").read_text())["format_version"] == FORMAT_VERSION


@pytest.mark.parametrize("text", ["torch profiler for a run", "How do I profile a run with torch?"])
def test_the_learned_weights_are_what_reranking_uses(retriever: Retriever, text: str) -> None:
    shipped = precision.load_weights()
    assert tuple(shipped) == precision.COLUMNS and shipped["first_stage"] > 0
    relative = [shipped[c] / shipped["first_stage"] for c in precision.COLUMNS[1:]]
    assert list(precision.shipped_weights()) == relative
    query = analyse(text, retriever.index.bm25)
    ranked = retriever.lexical.search(query.text, 10)
    rows = retriever.precision.features(query, ranked)
    # the columns of the fit, weighted by the shipped weights, are the scores reranking gives
    wide = precision.Precision.columns(rows, retriever.precision.traits(query, rows))
    expected = sorted(
        ((cid, row[0] + sum(w * x for w, x in zip(relative, row[1:]))) for (cid, _), row in zip(ranked, wide)),
        key=lambda item: (-item[1], item[0]),
    )
    got = retriever.precision.rerank(query, ranked)
    assert [c for c, _ in got] == [c for c, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])
    assert rows[0][0] == 1.0 and all(len(row) == len(precision.FEATURES) for row in rows)
    assert all(len(row) == len(precision.COLUMNS) for row in wide)
    assert all(0 <= row[0] <= 1 and 0 <= row[1] <= 1 and row[2] >= 0 for row in rows)
    gaps = {precision.FEATURES.index(f"{name}_gap") for name in precision.GAPS}
    assert all(0 <= x <= 1 for row in rows for j, x in enumerate(row) if j >= 3 and j not in gaps)
    assert all(row[j] <= 0 for row in rows for j in gaps)


def test_place_and_gap_features_say_where_a_candidate_stands_among_the_others(retriever: Retriever) -> None:
    query = analyse("torch profiler for a run", retriever.index.bm25)
    ranked = retriever.lexical.search(query.text, 20)
    rows = retriever.precision.features(query, ranked)
    rank = precision.FEATURES.index("rank")
    assert [row[rank] for row in rows] == pytest.approx(
        [math.log1p(place) / math.log(precision.DEPTH) for place in range(len(rows))]
    )
    assert rows[0][rank] == 0.0 and all(a[rank] < b[rank] for a, b in itertools.pairwise(rows))
    for name in precision.GAPS:
        own, gap = precision.FEATURES.index(name), precision.FEATURES.index(f"{name}_gap")
        best = max(row[own] for row in rows)
        assert [row[gap] for row in rows] == pytest.approx([row[own] - best for row in rows])
        assert max(row[gap] for row in rows) == 0.0
    assert any(row[precision.FEATURES.index("path_words_gap")] < 0 for row in rows)


def test_file_features_grade_a_candidates_file_among_the_candidates(retriever: Retriever) -> None:
    query = analyse("torch profiler for a run", retriever.index.bm25)
    ranked = retriever.lexical.search(query.text, 10)
    rows = retriever.precision.features(query, ranked)
    file_of = retriever.index.chunks.file
    sums: dict[int, float] = {}
    for (cid, score), row in zip(ranked, rows):
        sums[file_of[cid]] = sums.get(file_of[cid], 0.0) + score / ranked[0][1]
    top = max(sums.values())
    at = precision.FEATURES.index("file_sum")
    for (cid, _), row in zip(ranked, rows):
        assert row[at] == pytest.approx(sums[file_of[cid]] / top)
        same = sum(1 for c, _ in ranked if file_of[c] == file_of[cid])
        assert row[at + 1] == pytest.approx(math.log1p(same) / math.log1p(len(ranked)))
    assert max(row[at] for row in rows) == pytest.approx(1.0)


def test_the_listwise_fit_learns_which_feature_finds_the_answer() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    import cv

    rng = np.random.default_rng(1)
    questions = []
    for _ in range(40):
        features = rng.random((12, 2))
        label = (features[:, 1] == features[:, 1].max()).astype(np.float64)  # the second feature decides
        questions.append(cv.Question("set", "id", "q", [], list(range(12)), features, label, []))
    weights = cv.fit(questions, np.ones(2))
    assert weights[1] > 0 and weights[1] > abs(weights[0])
    assert cv.fit(questions, np.array([1.0, 0.0]))[1] == 0.0


def test_the_fit_per_truth_splits_a_question_among_the_truths_it_can_find() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    import cv

    rng = np.random.default_rng(2)
    questions, shares = [], (rng.random(30) + 0.5).tolist()
    for _ in range(30):
        n = int(rng.integers(6, 30))
        covers = rng.random((int(rng.integers(1, 4)), n)) < 0.2
        features = rng.normal(size=(n, 3))
        questions.append(
            cv.Question(
                "set",
                "id",
                "q",
                [],
                list(range(n)),
                features,
                np.asarray(covers.any(axis=0), dtype=np.float64),
                [],
                covers,
            )
        )
    weights = cv.fit(questions, np.ones(3), shares, per_truth=True)

    def loss(w: np.ndarray) -> float:  # written out: each findable truth's share of its question, then the penalty
        used = [(q, s) for q, s in zip(questions, shares) if q.label.any()]
        total, out = sum(s for _, s in used), 0.0
        for q, s in used:
            scores = q.features @ w
            found = [row for row in q.covers if row.any()]
            for row in found:
                out += s / total / len(found) * (np.log(np.exp(scores).sum()) - np.log(np.exp(scores[row]).sum()))
        return float(out + 0.5 * cv.L2 / len(used) * float(w @ w))

    slope = [(loss(weights + 1e-5 * e) - loss(weights - 1e-5 * e)) / 2e-5 for e in np.eye(3)]
    assert max(abs(g) for g in slope) < 1e-4  # the fit's optimum is that loss's
    assert not np.allclose(weights, cv.fit(questions, np.ones(3), shares))  # not the loss of every truth at once
    one = [cv.Question("set", "id", "q", [], q.ids, q.features, q.label, [], q.label[None, :] > 0) for q in questions]
    assert np.allclose(cv.fit(one, np.ones(3), shares, per_truth=True), cv.fit(one, np.ones(3), shares))


def test_grid_selection_scores_each_fold_with_the_setting_best_elsewhere() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    import cv_grid

    fold = np.array([0, 0, 1, 1])
    shipped = [{5: 1.0}, {5: 0.0}, {5: 1.0}, {5: 0.0}]  # 1/2 on every fold
    fits_fold_0 = [{5: 1.0}, {5: 1.0}, {5: 0.0}, {5: 0.0}]  # all of fold 0, none of fold 1
    out, chosen = cv_grid.select([shipped, fits_fold_0], 0, fold)
    # fold 0 is scored with what is best on fold 1 (shipped: 1/2 > 0), fold 1 likewise (fits_fold_0: 1 > 1/2)
    assert chosen == [0, 1]
    assert [o[5] for o in out] == [1.0, 0.0, 0.0, 0.0]
    tied, chosen = cv_grid.select([shipped, shipped], 1, fold)
    assert chosen == [1, 1] and tied == shipped  # ties go to the shipped setting
    # a setting that cannot change recall@5 (the order of the first five) is selected on another k
    first = [{1: 1.0, 5: 1.0}, {1: 0.0, 5: 1.0}, {1: 1.0, 5: 1.0}, {1: 0.0, 5: 1.0}]
    later = [{1: 0.0, 5: 1.0}] * 4
    assert cv_grid.select([later, first], 0, fold)[1] == [0, 0]  # recall@5 ties: shipped
    assert cv_grid.select([later, first], 0, fold, at=1)[1] == [1, 1]


def test_bootstrap_intervals_hold_the_mean_and_narrow_with_more_questions() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    import cv

    few = [1.0] * 9 + [0.0]
    lo, hi = cv.bootstrap_interval(few)
    assert lo < 0.9 < hi <= 1.0
    lo_many, hi_many = cv.bootstrap_interval(few * 20)
    assert lo < lo_many < 0.9 < hi_many and hi_many - lo_many < hi - lo
    assert cv.bootstrap_interval([1.0] * 5) == (1.0, 1.0)
    assert cv.bootstrap_interval(few) == (lo, hi)  # seeded: the same every run


def test_a_rewording_is_scored_in_the_fold_of_its_original() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
    import cv

    def question(qid: str) -> cv.Question:
        return cv.Question("set", qid, "q", [], [], np.zeros((0, 2)), np.zeros(0), [])

    originals = [question(f"q{i}") for i in range(10)]
    fold = cv.folds_of(len(originals), 5)
    reworded = [question(f"q{i}") for i in (7, 2, 9)] + [question("unknown")]
    assert cv.target_folds(originals, fold, reworded).tolist() == [fold[7], fold[2], fold[9], -1]
    assert cv.target_folds(originals, fold, originals).tolist() == fold.tolist()
