"""Never lose data, never crash: odd arguments, killed indexers, readers racing a writer."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import run_cli, write_repo
from fastrag.errors import UserError
from fastrag.faults import PAUSE_ENV
from fastrag.indexing import generations
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.generations import load_index
from fastrag.retrieval.retriever import Retriever
from test_cli import LORA_TRUTH, assert_one_line_error, write_dataset

# ----------------------------------------------------------------------------- odd queries


@pytest.mark.parametrize(
    "query",
    [
        "?!...;;",  # only punctuation: nothing to match
        "\x01\x02\x7f",  # control characters
        "lora " * 20_000,  # 100 KB
        "日本語の質問",  # no shared script with the corpus
        "lora\u200badapter",  # zero-width space
    ],
)
def test_odd_queries_end_cleanly(indexed: Path, query: str) -> None:
    result = run_cli("search", query, "--k", "5", cwd=indexed)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert result.out or result.err_lines == ["no match"]


def test_non_utf8_bytes_in_arguments(indexed: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fastrag", "search", b"lora \xff\xfe adapter", "--k", "3"],
        cwd=indexed,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"repo/docs/lora.md" in proc.stdout


def test_lone_surrogates_in_a_dataset(indexed: Path) -> None:
    dataset = indexed / "dataset_docs_odd.json"
    dataset.write_text('{"rag_questions": [{"question_id": "s", "question": "lora \\ud800 adapter"}]}')
    result = run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed)
    assert result.code == 0, result.err
    out = json.loads((indexed / "data/output/search_results/dataset_docs_odd.json").read_text())
    assert out["search_results"][0]["retrieved_sources"]


@pytest.mark.parametrize("k", ["1e30", "-0", "[3]", "0b", "None"])
def test_more_bad_k(indexed: Path, k: str) -> None:
    assert_one_line_error(run_cli("search", "lora", "--k", k, cwd=indexed), code=2)


@pytest.mark.parametrize("size", ["1e9", "49", "True", "[]"])
def test_more_bad_chunk_sizes(workdir: Path, size: str) -> None:
    assert_one_line_error(run_cli("index", "--repo_path", "repo", "--max_chunk_size", size, cwd=workdir), code=2)


def test_empty_question_list_writes_empty_results(indexed: Path) -> None:
    dataset = write_dataset(indexed / "dataset_code_empty.json", [])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
    out = json.loads((indexed / "data/output/search_results/dataset_code_empty.json").read_text())
    assert out == {"search_results": [], "k": 10}


def test_dataset_path_is_a_directory(indexed: Path) -> None:
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(indexed), cwd=indexed), code=1)


def test_dataset_that_is_binary(indexed: Path) -> None:
    path = indexed / "binary.json"
    path.write_bytes(b"\xff\xfe\x00\x01")
    assert_one_line_error(run_cli("search_dataset", "--dataset_path", str(path), cwd=indexed), code=1)


def test_missing_question_ids_get_fresh_ones(indexed: Path) -> None:
    dataset = write_dataset(indexed / "dataset_docs_noid.json", [{"question": "lora adapter?"}])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
    out = json.loads((indexed / "data/output/search_results/dataset_docs_noid.json").read_text())
    assert len(out["search_results"][0]["question_id"]) == 36


# ----------------------------------------------------------------------------- killed indexer


def big_repo(root: Path, files: int = 400) -> Path:
    """A repository large enough that indexing it takes a noticeable time."""
    write_repo(root)
    body = "".join(
        f"def function_{i}(value: int) -> int:\n    '''Step {i} of the pipeline.'''\n    return value + {i}\n\n"
        for i in range(60)
    )
    for i in range(files):
        (root / f"gen/module_{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"gen/module_{i}.py").write_text(f"# module {i}\n{body}")
    return root


def start_paused(args: list[str], cwd: Path, point: str) -> subprocess.Popen[bytes]:
    """Start ``python -m fastrag *args`` in its own process group; return once it is paused at ``point``.

    The pause points (:mod:`fastrag.faults`) make the kill land at a known moment inside the work.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrag", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, PAUSE_ENV: point},
        start_new_session=True,
    )
    assert proc.stderr is not None
    marker, seen = f"fastrag: paused at {point}\n".encode(), b""
    deadline = time.monotonic() + 120
    while marker not in seen:
        ready, _, _ = select.select([proc.stderr], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(proc.stderr.fileno(), 65536) if ready else b""
        if not chunk:
            kill_group(proc)
            pytest.fail(f"{args[0]} never paused at {point}: {seen.decode(errors='replace')[-2000:]}")
        seen += chunk
    return proc


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process and its children (chunking workers), then reap it."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


@pytest.mark.parametrize("point", ["chunking", "chunked", "staged", "renamed", "before-rename:CURRENT"])
def test_sigkill_during_index_keeps_previous_index(tmp_path: Path, point: str) -> None:
    """Killed at any moment of an index run before publication, the previous index stays live and whole."""
    write_repo(tmp_path / "repo")
    assert run_cli("index", "--repo_path", "repo", cwd=tmp_path).code == 0
    before = run_cli("search", "lora adapter", cwd=tmp_path).out
    assert before
    current = (tmp_path / "data/processed/CURRENT").read_bytes()

    big_repo(tmp_path / "repo")  # a lot to do for the next run
    proc = start_paused(["index", "--repo_path", "repo"], tmp_path, point)
    kill_group(proc)
    assert proc.returncode == -signal.SIGKILL

    assert (tmp_path / "data/processed/CURRENT").read_bytes() == current  # killed before publication
    assert not [p for p in load_index(tmp_path / "data/processed").chunks.paths if "/gen/" in p]
    after = run_cli("search", "lora adapter", cwd=tmp_path)
    assert after.code == 0, after.err
    assert after.out == before  # the old index, untouched
    # the next run completes, publishes the new files and cleans up what the killed one left
    assert run_cli("index", "--repo_path", "repo", cwd=tmp_path).code == 0
    assert [p for p in load_index(tmp_path / "data/processed").chunks.paths if "/gen/" in p]
    assert not [p for p in (tmp_path / "data/processed").iterdir() if p.name.endswith(".tmp")]


def test_killed_search_dataset_keeps_previous_output(indexed: Path) -> None:
    """Killed between writing its new output and renaming it into place, the old output stays whole."""
    dataset = write_dataset(indexed / "dataset_docs_k.json", [LORA_TRUTH])
    assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
    output = indexed / "data/output/search_results/dataset_docs_k.json"
    saved = output.read_bytes()
    assert json.loads(saved)["k"] == 10

    args = ["search_dataset", "--dataset_path", str(dataset), "--k", "3"]  # a different output
    proc = start_paused(args, indexed, f"before-rename:{output.name}")
    kill_group(proc)
    assert proc.returncode == -signal.SIGKILL

    assert output.read_bytes() == saved  # the old output, untouched
    # the kill fell inside the write: the whole new output sits in the temporary sibling
    (temp,) = output.parent.glob(f".{output.name}.*.tmp")
    assert json.loads(temp.read_bytes())["k"] == 3


# ----------------------------------------------------------------------------- readers vs writer


def test_two_indexers_at_once(tmp_path: Path) -> None:
    big_repo(tmp_path / "repo", files=200)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fastrag", "index", "--repo_path", "repo"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    assert "repo/gen/module_" in run_cli("search", "function_7 pipeline", "--k", "1", cwd=tmp_path).out
    assert not [p for p in (tmp_path / "data/processed").iterdir() if p.name.endswith(".tmp")]


def test_a_publication_beside_an_indexer_never_prunes_its_cache_mid_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedding cache is written into the index folder, whose publications prune temporary
    files: another indexer publishing while the cache's temporary file awaits its rename must wait
    (the race behind a rare failure of two indexers at once), not delete it."""
    from fastrag.indexing import storage
    from fastrag.indexing.generations import current_generation, publish
    from fastrag.indexing.vectors import CACHE_FILE

    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    other = threading.Thread(target=publish, args=(ix, lambda staging: (staging / "marker").write_text("x")))
    waited: list[bool] = []

    def meanwhile(name: str) -> None:
        if name == f"before-rename:{CACHE_FILE}" and not waited:
            other.start()  # another indexer publishes now
            other.join(timeout=1.0)
            waited.append(other.is_alive())

    monkeypatch.setattr(storage, "pause_point", meanwhile)
    report = build_index(repo, ix, IndexParams(embed="docs"), display_root="repo", progress=False)
    other.join(timeout=60)
    assert waited == [True]  # the publication waited for the cache to be in place
    # the other publication came after this build's lexical one and stays live (the last wins: the vectors
    # wait in the cache for the next build, see tests/test_vector_publish.py)
    assert (ix / CACHE_FILE).is_file() and report.path == report.lexical_path != current_generation(ix)
    assert not [p.name for p in ix.iterdir() if p.name.endswith(".tmp")]


def test_readers_see_old_or_new_index_never_a_mix(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    states = {
        "a": "def speculative_decoding():\n    return 'draft model A'\n",
        "b": "def speculative_decoding():\n    return 'draft model B'\n\n\nclass Extra:\n    pass\n",
    }
    expected: dict[str, list[tuple[str, int, int]]] = {}
    for name, text in states.items():
        (repo / "pkg/spec.py").write_text(text)
        build_index(repo, ix, display_root="repo", progress=False)
        hits = Retriever.open(ix).search("speculative decoding draft model", 5)
        expected[name] = [(h.file_path, h.start, h.end) for h in hits]
    assert expected["a"] != expected["b"]

    stop = threading.Event()
    errors: list[str] = []

    def writer() -> None:
        for i in range(12):
            (repo / "pkg/spec.py").write_text(states["ab"[i % 2]])
            build_index(repo, ix, display_root="repo", progress=False)
        stop.set()

    def reader() -> None:
        while not stop.is_set():
            try:
                hits = Retriever.open(ix).search("speculative decoding draft model", 5)
            except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
                errors.append(repr(exc))
                continue
            got = [(h.file_path, h.start, h.end) for h in hits]
            if got not in expected.values():
                errors.append(f"mixed result {got}")

    threads = [threading.Thread(target=writer), threading.Thread(target=reader), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]


def test_a_reader_slower_than_two_publications_reads_the_new_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that named a generation which two publications then replaced and pruned, before it read its
    files, starts over on the live one instead of failing on the missing files."""
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, display_root="repo", progress=False)
    real = generations.read_manifest
    began: list[Path] = []

    def read_while_two_builds_land(gen: Path) -> dict[str, object]:
        if not began:
            began.append(gen)
            for n in range(2):
                (repo / "pkg/spec.py").write_text(f"def speculative_decoding():\n    return {n}\n")
                build_index(repo, ix, display_root="repo", progress=False)
        return real(gen)

    monkeypatch.setattr(generations, "read_manifest", read_while_two_builds_land)
    index = load_index(ix)
    assert began and not began[0].exists()
    assert index.path.name == (ix / "CURRENT").read_text().strip() != began[0].name


def test_a_live_generation_missing_a_file_is_still_damage(tmp_path: Path) -> None:
    """Starting over is for a generation replaced meanwhile: a live one missing a file stays an error."""
    repo = write_repo(tmp_path / "repo")
    ix = tmp_path / "ix"
    build_index(repo, ix, display_root="repo", progress=False)
    live = ix / (ix / "CURRENT").read_text().strip()
    (live / "headings.json").unlink()
    with pytest.raises(UserError, match="damaged"):
        load_index(ix)


# ----------------------------------------------------------------------------- killed while embedding


def test_sigkill_during_embedding_keeps_previous_index(workdir: Path) -> None:
    """An indexer killed while it embeds leaves its lexical generation live and whole: published before
    embedding began, with the vectors the cache held; the next run embeds the rest."""
    assert run_cli("index", "--repo_path", "repo", "--vectors", "docs", cwd=workdir).code == 0
    query = ("search", "how do I load a lora adapter", "--mode", "hybrid", "--k", "3")
    before = run_cli(*query, cwd=workdir)
    assert before.code == 0 and before.out, before.err
    cache = workdir / "data/processed/embeddings.npz"
    cached = cache.read_bytes()

    for i in range(40):  # new docs to embed: the kill lands as soon as embedding begins
        page = workdir / f"repo/docs/guide_{i}.md"
        page.write_text(f"# Guide {i}\n\nStep {i}: tune the scheduler budget number {i} for throughput.\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastrag", "index", "--repo_path", "repo", "--vectors", "docs"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stderr is not None
    seen = b""
    while b"embedding:" not in seen:  # tqdm's bar: the model is loaded and embedding has begun
        chunk = os.read(proc.stderr.fileno(), 4096)
        assert chunk, f"indexer ended before embedding: {seen.decode(errors='replace')[-500:]}"
        seen += chunk
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    index = load_index(workdir / "data/processed")
    assert [p for p in index.chunks.paths if "guide_" in p]  # the lexical generation went live first
    assert index.has_vectors and index.manifest["vectors_pending"] == 40  # the old pages' vectors, from the cache
    after = run_cli(*query, cwd=workdir)
    assert after.code == 0 and after.out and "vectors pending" in after.err, after.err
    assert "repo/docs/guide_" in run_cli("search", "tune the scheduler budget", "--k", "1", cwd=workdir).out
    assert cache.read_bytes() == cached  # the cache is saved per slice of texts embedded whole (40: one slice)
    # the next run completes and leaves nothing half-written behind
    assert run_cli("index", "--repo_path", "repo", "--vectors", "docs", cwd=workdir).code == 0
    assert load_index(workdir / "data/processed").manifest["vectors_pending"] == 0
    assert "repo/docs/guide_" in run_cli("search", "How do I tune the scheduler budget?", "--k", "1", cwd=workdir).out
    assert not [p for p in (workdir / "data/processed").iterdir() if p.name.endswith(".tmp")]


# ----------------------------------------------------------------------------- read-only outputs


@pytest.mark.parametrize("command", ["search_dataset", "answer_dataset"])
def test_read_only_save_directory(indexed: Path, command: str) -> None:
    """A save directory the user may not write to: found before any work, one line, exit 1, nothing written."""
    from test_odd_repos import run_measured

    dataset = write_dataset(indexed / "dataset_docs_ro.json", [LORA_TRUTH])
    if command == "search_dataset":
        args = ["--dataset_path", str(dataset)]
    else:
        assert run_cli("search_dataset", "--dataset_path", str(dataset), cwd=indexed).code == 0
        args = ["--student_search_results_path", "data/output/search_results/dataset_docs_ro.json",
                "--model", str(indexed / "no-such-model.gguf")]  # fmt: skip  # never loaded: the check comes first
    locked = indexed / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        measured = run_measured(command, *args, "--save_directory", str(locked), cwd=indexed, unprivileged=True)
    finally:
        locked.chmod(0o755)
    assert_one_line_error(measured.result, 1)
    assert "cannot write to save directory" in measured.result.err and "locked" in measured.result.err
    assert list(locked.iterdir()) == []


def test_a_reader_that_goes_away_ends_the_command_quietly(indexed: Path) -> None:
    """``search ... | head -1``: when the reader of stdout is gone the command stops with the status a
    shell gives a filter cut short, and no traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "fastrag", "search", "How do I load a LoRA adapter?", "--k", "5"],
            cwd=indexed,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141


def test_a_folder_another_indexer_claims_while_this_one_looks_stays_claimable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other run's marker lands between this run's look for it and its listing of the folder, then the
    other run writes its generation: the folder is fastrag's all the same. A folder of someone else's files
    is still refused."""
    from fastrag.indexing.corpus import INDEX_MARKER

    index_dir = tmp_path / "index"
    (index_dir / "gen-0001-staging").mkdir(parents=True)
    (index_dir / INDEX_MARKER).write_text("fastrag index folder\n")
    real = Path.is_file
    looked: list[Path] = []

    def first_look_misses(path: Path) -> bool:
        if path.name == INDEX_MARKER and not looked:
            looked.append(path)
            return False  # as this run saw it, just before the other run's rename
        return real(path)

    monkeypatch.setattr(Path, "is_file", first_look_misses)
    generations.claim_index_dir(index_dir)
    assert looked and (index_dir / "gen-0001-staging").is_dir()
    monkeypatch.undo()
    other = tmp_path / "theirs"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    with pytest.raises(UserError, match="not a fastrag index"):
        generations.claim_index_dir(other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
