"""One ranking for every form of a query: the marks that end it never change what it finds.

Every question of the vLLM sets at hand and every query of the benchmark repositories is searched as
written, without its ``?``, with one appended, and with it replaced by ``.`` (and ``!``): the first ten
results must be the same spans in the same order.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from conftest import DATASETS, ROOT, SHARED, shared_path
from fastrag.evaluation.datasets import load_dataset
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.retrieval.retriever import Retriever, clean_query

XREPO = SHARED / "xrepo"
if str(ROOT / "benches") not in sys.path:
    sys.path.append(str(ROOT / "benches"))  # the bench scripts import each other by module name
K = 10


def forms(query: str) -> list[str]:
    """``query`` as written, then without its ending mark, with ``?``, ``.``, `` !`` and ``?`` after a blank."""
    bare = query.rstrip().rstrip("?.!").rstrip()
    return [query, bare, f"{bare}?", f"{bare}.", f"{bare} !", f"{bare} ?"]


def assert_same_in_every_form(retriever: Retriever, queries: Sequence[str], mode: str = "lexical") -> None:
    """The first :data:`K` hits of each query are the same in every one of its :func:`forms`."""
    asked = [forms(q) for q in queries]
    per_form = [retriever.search_many([f[i] for f in asked], K, mode) for i in range(len(asked[0]))]
    for j, query in enumerate(queries):
        first = [(h.file_path, h.start, h.end) for h in per_form[0][j]]
        assert first, query
        for i, results in enumerate(per_form[1:], 1):
            assert [(h.file_path, h.start, h.end) for h in results[j]] == first, (query, asked[j][i])


def test_clean_query_drops_only_the_ending_marks() -> None:
    assert clean_query("How do I load a LoRA adapter?") == "How do I load a LoRA adapter"
    assert clean_query("retry policy. ") == clean_query("retry policy !") == "retry policy"
    assert clean_query("what does `a?.b` do?!") == "what does `a?.b` do"
    assert clean_query("?") == clean_query(" . ") == ""


@pytest.fixture(scope="module")
def vllm(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    """The vLLM corpus indexed lexically (the default chunking and layers, no vectors)."""
    out = tmp_path_factory.mktemp("vllm-index")
    build_index(corpus, out, IndexParams(embed="none"), display_root="data/raw/vllm-0.10.1", progress=False)
    return Retriever.open(out)


def test_every_vllm_question_ranks_alike_in_every_form(vllm: Retriever) -> None:
    sets = sorted((DATASETS / "UnansweredQuestions").glob("*.json"))
    assert sets, "no question sets: run `make data`"
    questions = [q.question for path in sets for q in load_dataset(path).rag_questions]
    assert len(questions) >= 200
    assert_same_in_every_form(vllm, questions)


def test_every_benchmark_query_ranks_alike_in_every_form(tmp_path: Path) -> None:
    shared_path("xrepo/repos.json")  # skipped without ../shared, a failure in CI
    run = importlib.import_module("xrepo_run")
    xs = importlib.import_module("xrepo_score")
    repos = xs.load_repos(XREPO)
    trees = run.unpack_trees(repos, XREPO, tmp_path / "trees")
    tasks = xs.load_tasks(XREPO, repos)
    assert len(tasks) >= 800
    for repo in repos:
        out = tmp_path / "index" / repo.name
        build_index(trees[repo.name], out, IndexParams(embed="none"), progress=False)
        assert_same_in_every_form(Retriever.open(out), [t.query for t in tasks if t.repo == repo.name])
