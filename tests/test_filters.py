"""Search filters: path globs and languages, as the core's candidate mask, on every surface."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE_FILES, run_cli, write_repo
from fastrag.errors import UsageError, UserError
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import load_index
from fastrag.indexing.languages import BY_NAME, language_arg
from fastrag.indexing.vectors import DIM, VectorIndex
from fastrag.retrieval.filters import SearchFilter, glob_regex
from fastrag.retrieval.retriever import Retriever

FILES = {
    **SAMPLE_FILES,
    "core/src/lora.rs": "/// Load a LoRA adapter from disk at runtime.\npub fn load_lora_adapter() {}\n",
    "docs/api/lora_adapter.rst": "LoRA adapter API\n================\n\nLoad a LoRA adapter at runtime.\n",
}


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("docs/**", "docs/lora.md", True),
        ("docs/**", "docs/api/lora_adapter.rst", True),
        ("docs/**", "pkg/docs/x.md", False),
        ("docs/", "docs/api/lora_adapter.rst", True),
        ("*.py", "pkg/engine.py", True),
        ("*.py", "engine.py", True),
        ("pkg/*.py", "pkg/sub/engine.py", False),
        ("pkg/**/*.py", "pkg/engine.py", True),
        ("pkg/**/*.py", "pkg/sub/engine.py", True),
        ("**/lora*", "core/src/lora.rs", True),
        ("docs/[a-k]*.md", "docs/install.md", True),
        ("docs/[!a-k]*.md", "docs/install.md", False),
        ("doc?/*.md", "docs/lora.md", True),
        ("a+b(c)/*.md", "a+b(c)/x.md", True),
    ],
)
def test_glob_semantics(glob: str, path: str, expected: bool) -> None:
    assert bool(glob_regex(glob).match(path)) is expected


def test_language_names_and_suffixes() -> None:
    assert language_arg("python") is BY_NAME["python"]
    assert language_arg("PY") is BY_NAME["python"]
    assert language_arg(".rs") is BY_NAME["rust"]
    assert language_arg("cu") is BY_NAME["cuda"]
    for bad in ("klingon", "", None, 3):
        with pytest.raises(UsageError, match="--lang must be one of python"):
            language_arg(bad)
    with pytest.raises(UsageError, match="--path needs a glob"):
        SearchFilter.parse(["docs/**", ""])
    with pytest.raises(UsageError, match="at most 32 globs"):
        SearchFilter.parse([f"d{i}/**" for i in range(33)])


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("filters")
    write_repo(root / "repo", FILES)
    build_index(root / "repo", root / "index", IndexParams(), display_root="repo", progress=False)
    return root / "index"


def paths_of(retriever: Retriever, query: str, search_filter: SearchFilter, k: int = 10) -> set[str]:
    return {h.file_path for h in retriever.search(query, k, allowed=search_filter.mask(retriever.index))}


def test_mask_restricts_bm25_to_the_files_it_accepts(index_dir: Path) -> None:
    retriever = Retriever(load_index(index_dir))
    query = "load a LoRA adapter at runtime"
    everything = paths_of(retriever, query, SearchFilter())
    assert {"repo/docs/lora.md", "repo/pkg/engine.py", "repo/core/src/lora.rs"} <= everything
    assert paths_of(retriever, query, SearchFilter.parse("docs/**")) == {
        "repo/docs/lora.md",
        "repo/docs/api/lora_adapter.rst",
    }
    assert paths_of(retriever, query, SearchFilter.parse(lang="python")) == {"repo/pkg/engine.py"}
    assert paths_of(retriever, query, SearchFilter.parse(lang="rust")) == {"repo/core/src/lora.rs"}
    assert paths_of(retriever, query, SearchFilter.parse(["*.rs", "*.rst"])) == {
        "repo/core/src/lora.rs",
        "repo/docs/api/lora_adapter.rst",
    }
    assert paths_of(retriever, query, SearchFilter.parse("repo/docs/*.md")) == {"repo/docs/lora.md"}
    assert paths_of(retriever, query, SearchFilter.parse("docs/**", "python")) == set()
    chosen = SearchFilter.parse("docs/**")
    assert chosen.mask(retriever.index) is chosen.mask(retriever.index)  # cached per index
    assert SearchFilter().mask(retriever.index) is None


def test_vector_search_respects_the_mask() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(200, dtype=np.int64) * 3 + 1
    index = VectorIndex.build(ids, vectors)
    allowed = bytearray(ids.max() + 1)
    kept = ids[ids % 2 == 0]
    for cid in kept:
        allowed[cid] = 1
    queries = vectors[:6]
    got = index.search(queries, 5, min_score=-1, allowed=bytes(allowed))
    for qi, hits in enumerate(got):
        rows = np.flatnonzero(ids % 2 == 0)
        exact = queries[qi] @ vectors[rows].T
        assert [c for c, _ in hits] == ids[rows[np.argsort(-exact)[:5]]].tolist()
    assert index.search(queries[:1], 5, min_score=-1, allowed=bytes(len(allowed))) == [[]]


def hits(search_output: str) -> list[str]:
    """The result lines of ``search``'s output (each is followed by its snippet line)."""
    return [line for line in search_output.splitlines() if re.match(r"\s*\d+\. ", line)]


def test_cli_filters(index_dir: Path, tmp_path: Path) -> None:
    write_repo(tmp_path / "repo", FILES)
    assert run_cli("index", "--repo_path", "repo", cwd=tmp_path).code == 0
    query = "load a LoRA adapter at runtime"
    docs = run_cli("search", query, "--path", "docs/**", cwd=tmp_path)
    assert docs.code == 0 and docs.out.strip(), docs.err
    assert hits(docs.out) and all(" repo/docs/" in line for line in hits(docs.out))
    both = run_cli("search", query, "--path", "*.rs", "--path=*.py", cwd=tmp_path)
    named = {line.split()[1].split(":")[0] for line in hits(both.out)}
    assert named == {"repo/core/src/lora.rs", "repo/pkg/engine.py"}
    python = run_cli("search", query, "--lang", "python", cwd=tmp_path)
    assert hits(python.out) and all(".py:" in line for line in hits(python.out))
    bad = run_cli("search", query, "--lang", "klingon", cwd=tmp_path)
    assert bad.code != 0 and bad.err_lines == [bad.err_lines[0]] and "--lang must be one of" in bad.err


def test_file_kinds_of_any_repository(tmp_path: Path) -> None:
    files = {
        "src/main.go": "package main\n\nfunc main() {}\n",
        "src/App.kt": 'fun main() = println("hi")\n',
        "web/index.ts": "export const answer = 42;\n",
        "web/package.json": '{"name": "web"}\n',
        "data/tuning.json": '{"1": {"BLOCK_SIZE_M": 16}}\n',
        "scripts/run.sh": "echo run\n",
        "image.png": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    }
    write_repo(tmp_path / "repo", files)
    report = build_index(tmp_path / "repo", tmp_path / "index", IndexParams(), display_root="repo", progress=False)
    indexed = set(load_index(tmp_path / "index").chunks.paths)
    assert report.files == 5 and "repo/data/tuning.json" not in indexed and "repo/web/package.json" in indexed
    assert {(s.rel_path, s.reason) for s in report.skipped} == {
        ("data/tuning.json", "data format"),
        ("image.png", "binary or not UTF-8"),
    }
    write_repo(tmp_path / "other", {"image.png": "\x00x", "data.bin": "\x00y"})
    with pytest.raises(
        UserError, match=r"^no readable text files under .*other \(skipped 2 files: .*binary or not UTF-8"
    ):
        build_index(tmp_path / "other", tmp_path / "index2", IndexParams(), progress=False)
