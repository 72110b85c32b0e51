"""Tests of the native core ``fastrag._core``: offsets, tokenizer, BM25 index and its file format."""

from __future__ import annotations

import math
import os
import struct
import threading
import zlib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag import _core
from fastrag._core import Bm25Index, IndexFormatError

# Text with multi-byte characters and every kind of line break.
TEXT = st.text(alphabet=st.sampled_from(list("ab \n\r\té€😀_Z9")) | st.characters(codec="utf-8"), max_size=60)


def py_line_starts(s: str) -> list[int]:
    """Line starts as Python's tokenizer sees them: after ``\\n``, ``\\r\\n`` and a lone ``\\r``."""
    starts = [0]
    for i, ch in enumerate(s):
        if ch == "\n" or (ch == "\r" and s[i + 1 : i + 2] != "\n"):
            starts.append(i + 1)
    return starts


# --- offsets ---------------------------------------------------------------------------------


@settings(deadline=None)
@given(TEXT)
def test_line_starts_match_python(s: str) -> None:
    assert _core.line_starts(s) == py_line_starts(s)


@settings(deadline=None)
@given(TEXT)
def test_byte_char_conversions_match_python(s: str) -> None:
    chars = list(range(len(s) + 1))
    byte_offsets = [len(s[:i].encode()) for i in chars]
    assert _core.bytes_to_chars(s, byte_offsets) == chars
    assert _core.chars_to_bytes(s, chars) == byte_offsets
    # a byte offset inside a character maps to that character
    for i, ch in enumerate(s):
        width = len(ch.encode())
        if width > 1:
            assert _core.bytes_to_chars(s, [byte_offsets[i] + width - 1]) == [i]


def test_validate_spans() -> None:
    _core.validate_spans(10, [(0, 10), (3, 4)], 2000)
    for bad in [(5, 5), (0, 11), (6, 5)]:
        with pytest.raises(ValueError):
            _core.validate_spans(10, [bad], 2000)
    with pytest.raises(ValueError):
        _core.validate_spans(10, [(0, 10)], 9)
    assert isinstance(_core.__version__, str)


# --- tokenizer -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("getHTTPResponse", ["gethttpresponse", "get", "http", "response"]),
        ("FusedMoE", ["fusedmoe", "fused", "moe"]),
        ("fp8 qwen3", ["fp8", "fp", "qwen3", "qwen"]),
        ("fused_moe_kernel", ["fused_moe_kernel", "fused", "moe", "kernel"]),
        ("__init__", ["init"]),
        ("RoPE LoRAConfig", ["rope", "loraconfig", "lora", "config"]),
        ("What is the KV cache of vLLM?", ["kv", "cache", "vllm", "llm"]),
        ("is_available", ["is_available", "available"]),
        ("def return None class import self", ["def", "return", "none", "class", "import", "self"]),
        ("déjà-vu ÜberNetz", ["déjà", "vu", "übernetz", "über", "netz"]),
        ("", []),
    ],
)
def test_tokenize_examples(text: str, tokens: list[str]) -> None:
    assert _core.tokenize(text, stem=False) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("supported architectures", ["support", "architectur"]),
        ("Supports the architecture", ["support", "architectur"]),
        ("load_lora_adapters", ["load_lora_adapters", "load", "lora", "adapt"]),
        ("gpus fp8 uses", ["gpus", "fp8", "fp", "use"]),
    ],
)
def test_stemming_meets_word_forms(text: str, tokens: list[str]) -> None:
    assert _core.tokenize(text) == tokens


def test_lone_surrogates_raise_not_crash() -> None:
    with pytest.raises(UnicodeEncodeError):
        _core.tokenize("a\ud800b")
    with pytest.raises(UnicodeEncodeError):
        Bm25Index.build(["ok", "\udfff"])


def test_tokenize_options() -> None:
    assert _core.tokenize("What is fp8?", stopwords=False, min_len=1) == ["what", "is", "fp8", "fp", "8"]
    assert _core.tokenize("fused_moe", parts=False) == ["fused_moe"]
    assert _core.tokenize("kv cache", min_len=3, stem=False) == ["cache"]
    with pytest.raises(ValueError, match="min_len"):
        _core.tokenize("x", min_len=-1)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans(), st.integers(0, 4))
def test_tokenize_never_fails(text: str, stopwords: bool, min_len: int) -> None:
    tokens = _core.tokenize(text, stopwords=stopwords, min_len=min_len)
    assert all(len(t) >= max(min_len, 1) for t in tokens)
    assert _core.tokenize_batch([text, text], stopwords=stopwords, min_len=min_len) == [tokens, tokens]


# --- BM25 ------------------------------------------------------------------------------------

DOCS = [
    "def fused_moe(x): return FusedMoE(x)",
    "The KV cache stores keys and values for every layer.",
    "class KVCache:\n    '''Cache of keys and values.'''",
    "RoPE scaling extends the context of rotary embeddings.",
    "",
    "What is vLLM? vLLM is a fast inference engine for LLMs.",
    "LoRA adapters are loaded at runtime: load_lora_adapter().",
]


@pytest.fixture(scope="module")
def index() -> Bm25Index:
    return Bm25Index.build(DOCS)


def naive_bm25(docs: list[str], query: str, k1: float, b: float) -> list[float]:
    """Textbook BM25 (Lucene idf) over the native tokenizer's tokens; query terms counted once."""
    toks = [_core.tokenize(d) for d in docs]
    n = len(docs)
    avgdl = sum(map(len, toks)) / n
    df = Counter(t for d in toks for t in set(d))
    scores = []
    for d in toks:
        tf = Counter(d)
        s = 0.0
        for term in set(_core.tokenize(query)):
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                s += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return scores


def test_keyword_defaults_are_the_exported_constants(index: Bm25Index) -> None:
    """The defaults are written once, in the core: its keyword defaults are its ``DEFAULT_*``
    constants, and the configuration Python indexes with reads the same values."""
    from fastrag import config

    defaults = (
        _core.DEFAULT_K1,
        _core.DEFAULT_B,
        _core.DEFAULT_STOPWORDS,
        _core.DEFAULT_MIN_LEN,
        _core.DEFAULT_PARTS,
        _core.DEFAULT_STEM,
    )
    assert defaults == (1.2, 0.75, True, 2, True, True)
    assert (index.k1, index.b, index.stopwords, index.min_len, index.parts, index.stem) == defaults
    text = "What is the fp8 KV cache? load_lora_adapter supports architectures"
    tokens = _core.tokenize(text, stopwords=True, min_len=2, parts=True, stem=True)
    assert _core.tokenize(text) == tokens
    assert _core.tokenize_batch([text]) == [tokens]
    # each default matters: changing it changes the tokens
    assert _core.tokenize(text, stopwords=False) != tokens
    assert _core.tokenize(text, min_len=1) != tokens
    assert _core.tokenize(text, parts=False) != tokens
    assert _core.tokenize(text, stem=False) != tokens
    assert (config.BM25_K1, config.BM25_B) == (_core.DEFAULT_K1, _core.DEFAULT_B)


def test_index_properties(index: Bm25Index) -> None:
    assert index.num_docs == len(DOCS)
    assert index.num_terms > 20
    assert (index.k1, index.b, index.stopwords, index.min_len, index.parts) == (1.2, 0.75, True, 2, True)
    assert index.avgdl == pytest.approx(sum(len(_core.tokenize(d)) for d in DOCS) / len(DOCS))
    assert index.doc_len(4) == 0
    assert index.doc_len(0) == len(_core.tokenize(DOCS[0]))
    assert index.idf("moe") > 0
    assert index.idf("nonexistent") == 0.0
    assert index.tokenize("How does FusedMoE work?") == ["fusedmo", "fuse", "moe", "work"]
    assert "num_docs=7" in repr(index)
    with pytest.raises(ValueError):
        index.doc_len(7)
    with pytest.raises(TypeError):
        Bm25Index()


def test_search(index: Bm25Index) -> None:
    ids, scores = index.search("kv cache", 10)
    assert sorted(ids) == [1, 2]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert index.search("kv cache", 1) == ([ids[0]], [scores[0]])
    assert index.search("kv cache", 0) == ([], [])
    assert index.search("kv cache", 2**62) == (ids, scores)
    assert index.search("", 10) == ([], [])
    assert index.search("asdfghjkl", 10) == ([], [])
    assert index.score_docs("kv cache", ids + [0]) == pytest.approx(scores + [0.0])
    assert index.score_docs("kv cache", ids) == scores  # bit-identical
    with pytest.raises(ValueError, match="k must be >= 0"):
        index.search("kv", -1)
    with pytest.raises(ValueError):
        index.score_docs("kv", [99])


def test_allowed_mask(index: Bm25Index) -> None:
    ids, _ = index.search("kv cache", 10)
    mask = bytearray(b"\x01" * len(DOCS))
    mask[ids[0]] = 0
    assert index.search("kv cache", 10, allowed=bytes(mask))[0] == ids[1:]
    assert index.search("kv cache", 10, allowed=mask)[0] == ids[1:]
    assert index.search("kv cache", 10, allowed=bytes(len(DOCS))) == ([], [])
    with pytest.raises(ValueError, match="one byte per document"):
        index.search("kv cache", 10, allowed=b"\x01")
    batch = index.search_batch(["kv cache"], 10, allowed=bytes(mask))
    assert batch[0][0] == ids[1:]


def test_bad_build_arguments() -> None:
    for kwargs in [{"k1": -1.0}, {"b": 1.5}, {"k1": math.nan}, {"min_len": -2}]:
        with pytest.raises(ValueError):
            Bm25Index.build(DOCS, **kwargs)  # type: ignore[arg-type]
    empty = Bm25Index.build([])
    assert (empty.num_docs, empty.num_terms, empty.search("x", 3)) == (0, 0, ([], []))


WORDS = ["alpha", "beta", "gamma", "fp8", "getValue", "the", "x_y", "Ω", "déjà", "KVCache"]
CORPUS = st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), min_size=1, max_size=15)
QUERY = st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(CORPUS, QUERY, st.floats(0, 3), st.floats(0, 1))
def test_scores_match_naive_bm25(docs: list[str], query: str, k1: float, b: float) -> None:
    index = Bm25Index.build(docs, k1=k1, b=b)
    expected = naive_bm25(docs, query, k1, b)
    ids, scores = index.search(query, len(docs))
    assert sorted(ids) == [i for i, s in enumerate(expected) if s > 0]
    for i, s in zip(ids, scores):
        assert s == pytest.approx(expected[i], rel=1e-5, abs=1e-6)
    assert list(zip(ids, scores)) == sorted(zip(ids, scores), key=lambda p: (-p[1], p[0]))


@settings(max_examples=40, deadline=None)
@given(CORPUS, st.lists(QUERY, max_size=20), st.integers(0, 5), st.sampled_from([None, 1, 2, 3]))
def test_search_batch_equals_search(docs: list[str], queries: list[str], k: int, threads: int | None) -> None:
    index = Bm25Index.build(docs)
    assert index.search_batch(queries, k, threads=threads) == [index.search(q, k) for q in queries]


@settings(max_examples=60, deadline=None)
@given(CORPUS, QUERY, st.integers(0, 8))
def test_search_tokens_equals_search(docs: list[str], query: str, k: int) -> None:
    index = Bm25Index.build(docs)
    tokens = index.tokenize(query)
    assert index.search_tokens(tokens, k) == index.search(query, k)
    # tokens are taken as given: repeats count once, unknown or untokenized words match nothing
    assert index.search_tokens(tokens + tokens[::-1], k) == index.search(query, k)
    assert index.search_tokens([t.upper() + "\u00e9" for t in tokens], k) == ([], [])


def test_search_tokens_arguments(index: Bm25Index) -> None:
    assert index.search_tokens([], 3) == ([], [])
    with pytest.raises(ValueError, match="k must be"):
        index.search_tokens(["kv"], -1)
    with pytest.raises(TypeError):
        index.search_tokens("kv cache", 3)  # a str is a sequence of str, but not a list of tokens


def test_search_batch_threads_argument(index: Bm25Index) -> None:
    with pytest.raises(ValueError, match="threads"):
        index.search_batch(["kv"], 3, threads=0)
    with pytest.raises(ValueError, match="threads"):
        index.search_batch(["kv"], 3, threads=10**6)
    with pytest.raises(ValueError, match="k must be"):
        index.search_batch(["kv"], -3)


def test_concurrent_searches_from_python_threads(index: Bm25Index) -> None:
    queries = ["kv cache", "fused moe", "lora adapter runtime", "what is vllm"] * 50
    expected = [index.search(q, 3) for q in queries]
    results: list[object] = [None] * 4

    def work(slot: int) -> None:
        results[slot] = index.search_batch(queries, 3) if slot % 2 else [index.search(q, 3) for q in queries]

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(r == expected for r in results)


# --- file format -----------------------------------------------------------------------------


def test_save_load_round_trip(index: Bm25Index, tmp_path: Path) -> None:
    path = tmp_path / "bm25.bin"
    index.save(path)
    assert not (tmp_path / "bm25.bin.tmp").exists()
    loaded = Bm25Index.load(str(path))
    assert (loaded.num_docs, loaded.num_terms, loaded.avgdl) == (index.num_docs, index.num_terms, index.avgdl)
    for q in ["kv cache", "fused moe", "rope", "lora adapter"]:
        assert loaded.search(q, 5) == index.search(q, 5)
    custom = Bm25Index.build(DOCS, k1=0.9, b=0.4, stopwords=False, min_len=1, parts=False)
    custom.save(path)
    again = Bm25Index.load(path)
    assert (again.k1, again.b, again.stopwords, again.min_len, again.parts) == (0.9, 0.4, False, 1, False)
    assert again.tokenize("What is x?") == ["what", "is", "x"]


def test_save_to_missing_directory_raises_oserror(index: Bm25Index, tmp_path: Path) -> None:
    with pytest.raises(OSError):
        index.save(tmp_path / "missing" / "bm25.bin")


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="fastrag index"):
        Bm25Index.load(tmp_path / "nope.bin")
    with pytest.raises(OSError):
        Bm25Index.load(tmp_path)  # a directory


def corruptions(good: bytes) -> dict[str, tuple[bytes, str]]:
    """Corrupted variants of a valid file, each with the words its error must contain."""
    payload = good[24:]
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x10
    other = bytearray(good)
    other[8:12] = struct.pack("<I", 99)
    bad_doc_id = bytearray(payload)
    # last 4 bytes: the last document's length; the doc ids precede contributions and lengths
    n_docs = len(DOCS)
    n_postings = struct.unpack_from("<Q", payload, 48)[0]
    ids_end = len(payload) - 4 * n_docs - 4 * n_postings
    bad_doc_id[ids_end - 4 : ids_end] = struct.pack("<I", 1000)
    resealed = good[:12] + struct.pack("<QI", len(bad_doc_id), zlib.crc32(bad_doc_id)) + bytes(bad_doc_id)
    return {
        "empty": (b"", "empty"),
        "header": (good[:10], "truncated"),
        "payload": (good[:-7], "truncated"),
        "trailing": (good + b"\0", "unexpected bytes"),
        "magic": (b"PK\x03\x04" + good[4:], "magic"),
        "version": (bytes(other), "version 99"),
        "checksum": (bytes(flipped), "checksum"),
        "inconsistent": (resealed, "doc ids"),
    }


def test_corrupt_files_raise_index_format_error(index: Bm25Index, tmp_path: Path) -> None:
    path = tmp_path / "bm25.bin"
    index.save(path)
    good = path.read_bytes()
    for name, (data, words) in corruptions(good).items():
        bad = tmp_path / f"{name}.bin"
        bad.write_bytes(data)
        with pytest.raises(IndexFormatError) as info:
            Bm25Index.load(bad)
        message = str(info.value)
        assert words in message, (name, message)
        assert message.endswith("re-run `fastrag index` to rebuild it"), message
        assert isinstance(info.value, ValueError)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_damage_never_crashes(
    index: Bm25Index, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("damage") / "bm25.bin"
    index.save(path)
    good = path.read_bytes()
    raw = bytearray(good)
    cut = data.draw(st.integers(0, len(raw)))
    flips = data.draw(st.lists(st.integers(0, len(raw) - 1), max_size=3))
    for at in flips:
        raw[at] ^= 0xFF
    damaged = bytes(raw[:cut])
    path.write_bytes(damaged)
    if damaged == good:  # flips that cancel out, no cut
        assert Bm25Index.load(path).num_docs == index.num_docs
    else:
        with pytest.raises(IndexFormatError):
            Bm25Index.load(path)
    os.remove(path)


def test_respell_reads_a_slip_as_the_word_the_index_holds() -> None:
    docs = ["the StateManager tracks worker state", "validates the schema and records its changes"] * 3
    index = Bm25Index.build(docs)
    assert index.respell("how the StaetManager valdates chnages?") == "how the StateManager validates changes?"
    assert index.respell("andc hanges") == "and changes", "a space typed a letter early"
    # words the index holds, short words, a first letter wrong, a word with no near spelling: left as typed
    for typed in ("how the StateManager validates changes", "the sta", "xhanges", "quantum physics", ""):
        assert index.respell(typed) is None, typed
    with pytest.raises(TypeError):
        index.respell(None)  # type: ignore[arg-type]
