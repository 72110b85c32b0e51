"""The precision stage (re-ranking, re-cutting) and the query side (identifier variants)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag import _core
from fastrag.indexing.builder import IndexParams, build_index
from fastrag.indexing.chunking import chunk_file
from fastrag.indexing.reading import IndexedFiles
from fastrag.indexing.records import FileRecord
from fastrag.indexing.symbols import file_symbols
from fastrag.indexing.texts import Definitions, SymbolDefinitions, defined_names, definitions_of
from fastrag.retrieval import precision
from fastrag.retrieval import retriever as retriever_module
from fastrag.retrieval.evidence import path_kind
from fastrag.retrieval.lexical import LexicalSearcher
from fastrag.retrieval.precision import COLUMNS, FEATURES, TRAITS, Precision, densest_span, file_stem, recut
from fastrag.retrieval.query import analyse, glued_parts, identifier_variants
from fastrag.retrieval.retriever import NESTED, OVERLAP, Retriever

FILLER = "".join(f"filler line number {i} about nothing in particular\n" for i in range(40))
EVIDENCE = "def load_lora_adapter(name):\n    # load the lora adapter from disk\n    return lora_adapter_cache[name]\n"


def lines_tokenizer(lines: list[str]) -> list[list[str]]:
    """The default tokenizer, one list of tokens per line."""
    return _core.tokenize_batch(lines)


def weights_of(text: str) -> dict[str, float]:
    """Equal weights for the tokens of ``text``."""
    return dict.fromkeys(_core.tokenize(text), 1.0)


# --------------------------------------------------------------------------- span choice


def test_the_window_covers_the_densest_evidence() -> None:
    text = FILLER + EVIDENCE + FILLER
    lo, hi = densest_span(text, 0, len(text), weights_of("load lora adapter"), 300, lines_tokenizer)
    assert text.index(EVIDENCE) >= lo
    assert text.index(EVIDENCE) + len(EVIDENCE) <= hi
    assert 0 < hi - lo <= 300
    assert lo == 0 or text[lo - 1] == "\n"  # cut at a line start


def test_more_evidence_beats_a_single_mention() -> None:
    lone = "the adapter is mentioned here once\n"
    text = lone + FILLER + EVIDENCE + FILLER
    lo, hi = densest_span(text, 0, len(text), weights_of("load lora adapter"), 250, lines_tokenizer)
    assert lo > len(lone)
    assert text.index("def load_lora_adapter") < hi


def test_idf_weights_decide_between_windows() -> None:
    text = FILLER + "rare_term appears here\n" + FILLER + "common common common\n" + FILLER
    weights = {"rare_term": 5.0, "common": 0.1}
    lo, hi = densest_span(text, 0, len(text), weights, 200, lines_tokenizer)
    assert "rare_term" in text[lo:hi]


def test_span_is_unchanged_without_evidence_or_when_it_fits() -> None:
    text = FILLER * 2
    assert densest_span(text, 10, 1900, weights_of("lora adapter"), 300, lines_tokenizer) == (10, 1900)
    assert densest_span(text, 10, 200, weights_of("filler"), 300, lines_tokenizer) == (10, 200)
    assert densest_span(text, 10, 1900, {}, 300, lines_tokenizer) == (10, 1900)


def test_a_line_longer_than_the_window_is_cut_around_its_evidence() -> None:
    text = "x " * 100 + "\n" + "word " * 400 + "lora adapter " + "word " * 400 + "\n" + "y " * 100
    lo, hi = densest_span(text, 0, len(text), weights_of("lora adapter"), 500, lines_tokenizer)
    assert 0 < hi - lo <= 500
    assert "lora adapter" in text[lo:hi]
    assert text[lo - 1] in " \n"  # words stay whole


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["lora", "adapter", "load", "other", "words", "\n", " ", "é"]), max_size=400),
    st.integers(min_value=24, max_value=400),
    st.data(),
)
def test_windows_stay_inside_the_span(parts: list[str], size: int, data: st.DataObject) -> None:
    text = " ".join(parts)
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    end = data.draw(st.integers(min_value=start, max_value=len(text)))
    lo, hi = densest_span(text, start, end, weights_of("load lora adapter"), size, lines_tokenizer)
    assert start <= lo <= hi <= end
    assert (lo, hi) == (start, end) or 0 < hi - lo <= size  # narrowed, or left alone (no evidence)
    if (lo, hi) != (start, end):  # a narrowed window holds evidence
        assert set(_core.tokenize(text[lo:hi])) & {"load", "lora", "adapt"}


def test_file_stem() -> None:
    assert file_stem("data/raw/x/vllm/v1/sample/rejection_sampler.py") == "rejection_sampler"
    assert file_stem("docs/getting_started/installation/gpu/cuda.inc.md") == "cuda"
    assert file_stem("a/.gitignore") == ""


# --------------------------------------------------------------------------- query side


@pytest.fixture(scope="module")
def vocabulary() -> _core.Bm25Index:
    """A small BM25 index whose vocabulary has a few identifiers."""
    return _core.Bm25Index.build(
        [
            "def load_lora_adapter(name): pass",
            "class LoadLoraAdapter: pass",
            "class DeepseekModel: the deepseek model",
            "gpt2 weights and a model",
            "the rejection sampler in rejection_sampler.py",
        ]
    )


def test_adjacent_words_meet_their_identifiers(vocabulary: _core.Bm25Index) -> None:
    found = identifier_variants("How do I load a LoRA adapter at runtime?", vocabulary)
    assert found == []  # "a" sits between "load" and "LoRA": no run spells the identifier
    found = identifier_variants("load lora adapter", vocabulary)
    assert "load_lora_adapter" in found
    assert vocabulary.tokenize("LoadLoraAdapter")[0] in found  # CamelCase, lowercased (and stemmed) whole


def test_joined_words_and_camel_case(vocabulary: _core.Bm25Index) -> None:
    assert identifier_variants("What is the DeepSeek model?", vocabulary) == ["deepseekmodel"]
    assert identifier_variants("the rejection sampler", vocabulary) == ["rejection_sampler"]


def test_variants_need_the_vocabulary_and_no_stopwords(vocabulary: _core.Bm25Index) -> None:
    assert identifier_variants("unknown words together", vocabulary) == []
    assert identifier_variants("for the model of the sampler", vocabulary) == []
    # already a query term: not a variant
    assert identifier_variants("rejection_sampler rejection sampler", vocabulary) == []


def test_a_word_the_index_does_not_know_is_split_into_words_it_does(vocabulary: _core.Bm25Index) -> None:
    assert glued_parts("samplermodel", vocabulary) == ["sampler", "model"]
    assert glued_parts("the rejectionsampler class", vocabulary) == ["rejection", "sampler"]
    assert glued_parts("deepseekmodel", vocabulary) == []  # known whole: the index has it as one term
    assert glued_parts("qwertyuiop zzzzzzzz", vocabulary) == []  # no split into known words
    assert glued_parts("gptmo", vocabulary) == []  # too short to be glued from parts of 3 characters


def test_a_glued_lowercase_identifier_finds_the_words_it_glues() -> None:
    index = _core.Bm25Index.build(["the vitest runner", "a project of many files", "vitest project setup here"])
    searcher = LexicalSearcher(index)
    assert index.search("vitestproject", 3) == ([], [])
    assert searcher.searched("vitestproject") == "vitestproject vitest project"
    assert searcher.search("vitestproject", 3)[0][0] == 2
    assert searcher.search_many(["vitestproject"], 3) == [searcher.search("vitestproject", 3)]


def test_blank_query_gives_nothing(vocabulary: _core.Bm25Index) -> None:
    for blank in ("", "   ", "\n\t"):
        query = analyse(blank, vocabulary)
        assert query.text == "" and not query.terms and not query.variants
    query = analyse("the rejection sampler", vocabulary)
    assert query.variants == ("rejection_sampler",)
    assert "rejection_sampler" in query.all_terms and "sampler" in query.terms


# --------------------------------------------------------------------------- re-ranking

MODULE = '''"""Rejection sampler."""


class RejectionSampler:
    def forward(self, draft_probs, target_probs):
        """draft_probs may be None when the proposer is n-gram based."""
        if draft_probs is None:
            return target_probs
        return draft_probs
'''
TESTS = "".join(
    f"""
def test_rejection_sampler_{i}():
    # the rejection sampler with draft_probs, again and again
    sampler = RejectionSampler()
    draft_probs = make_draft_probs({i})
    assert sampler.forward(draft_probs, None) is draft_probs
"""
    for i in range(3)
)
REPO = {
    "vllm/sample/rejection_sampler.py": MODULE,
    "tests/sample/test_rejection_sampler.py": TESTS,
    "docs/notes.md": "# Notes\n\n" + FILLER,
}


def indexed(root: Path, files: dict[str, str]) -> Path:
    """``files`` written under ``root/repo`` and indexed (default parameters) into ``root/index``, returned."""
    for rel, text in files.items():
        (root / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "repo" / rel).write_text(text)
    build_index(root / "repo", root / "index", IndexParams(), display_root="repo", progress=False)
    return root / "index"


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    """A retriever over :data:`REPO`."""
    return Retriever.open(indexed(tmp_path_factory.mktemp("precision"), REPO))


QUESTION = "Can draft_probs be None in the rejection sampler?"


def test_the_file_the_question_names_comes_first(retriever: Retriever) -> None:
    plain = retriever.search(QUESTION, 3, "lexical", precision=False)
    precise = retriever.search(QUESTION, 3, "lexical", precision=True)
    assert plain[0].file_path == "repo/tests/sample/test_rejection_sampler.py"  # more mentions win in BM25
    assert precise[0].file_path == "repo/vllm/sample/rejection_sampler.py"
    assert {h.file_path for h in precise} == {h.file_path for h in plain}


def test_name_bonus_follows_idf_and_whole_names(retriever: Retriever) -> None:
    index = retriever.index
    stage = Precision(index.bm25, index.chunks.paths, index.chunks.file)
    ids = {index.chunks.paths[index.chunks.file[c]]: c for c in range(len(index.chunks))}
    query = analyse(QUESTION, index.bm25)
    module = stage.name_match(ids["repo/vllm/sample/rejection_sampler.py"], query.all_terms)
    assert 0 < module <= 1
    assert stage.name_match(ids["repo/tests/sample/test_rejection_sampler.py"], query.all_terms) == 0
    assert stage.name_match(ids["repo/docs/notes.md"], query.all_terms) == 0
    unnamed = analyse("Can draft_probs be None?", index.bm25)
    assert stage.name_match(ids["repo/vllm/sample/rejection_sampler.py"], unnamed.all_terms) == 0


def test_a_file_named_by_the_query_in_another_form(retriever: Retriever) -> None:
    index = retriever.index
    stage = Precision(index.bm25, index.chunks.paths, index.chunks.file)
    text = "rejection sampling"  # `sampl` and `reject` spell `rejection_sampler` only as prefixes
    ranked = retriever.lexical.search(text, 20)
    rows = stage.features(analyse(text, index.bm25), ranked)
    by_path = {index.chunks.paths[index.chunks.file[cid]]: row for (cid, _), row in zip(ranked, rows)}
    forms, exact = FEATURES.index("name_forms"), FEATURES.index("file_name")
    module = by_path["repo/vllm/sample/rejection_sampler.py"]
    assert module[forms] == 1.0 and module[exact] == 0.0
    assert by_path["repo/tests/sample/test_rejection_sampler.py"][forms] == 0.0  # nothing spells its `test`
    assert all(len(row) == len(FEATURES) for row in rows)


def test_a_file_named_by_the_first_phrase_of_the_query(retriever: Retriever) -> None:
    index = retriever.index
    stage = Precision(index.bm25, index.chunks.paths, index.chunks.file)
    lead, whole, forms = FEATURES.index("lead_name"), FEATURES.index("lead_whole"), FEATURES.index("name_forms")
    module = "repo/vllm/sample/rejection_sampler.py"

    def rows_of(text: str) -> dict[str, tuple[float, ...]]:
        ranked = retriever.lexical.search(text, 50)
        rows = stage.features(analyse(text, index.bm25), ranked)
        return {index.chunks.paths[index.chunks.file[cid]]: row for (cid, _), row in zip(ranked, rows)}

    first = rows_of("rejection sampling of draft probs")  # the phrase it opens with names the module
    assert first[module][lead] == first[module][whole] == 1.0
    tests = first["repo/tests/sample/test_rejection_sampler.py"]
    assert tests[lead] == 1.0 and tests[whole] == 0.0  # its `test` is not in the phrase
    later = rows_of("draft probs in rejection sampling")  # the same words, the module named only later
    assert later[module][lead] == later[module][whole] == 0.0 and later[module][forms] == 1.0


def test_rerank_keeps_every_candidate_and_sorts(retriever: Retriever) -> None:
    index = retriever.index
    stage = Precision(index.bm25, index.chunks.paths, index.chunks.file)
    ranked = retriever.lexical.search(QUESTION, 20)
    out = stage.rerank(analyse(QUESTION, index.bm25), ranked)
    assert sorted(c for c, _ in out) == sorted(c for c, _ in ranked)
    assert [s for _, s in out] == sorted((s for _, s in out), reverse=True)
    assert stage.rerank(analyse(QUESTION, index.bm25), []) == []
    silent = Precision(index.bm25, index.chunks.paths, index.chunks.file, weights=[0.0] * (len(COLUMNS) - 1))
    assert [c for c, _ in silent.rerank(analyse(QUESTION, index.bm25), ranked)] == [c for c, _ in ranked]


@pytest.mark.parametrize("focus", [0, 120, 400])
def test_results_are_distinct_and_valid_spans(retriever: Retriever, focus: int) -> None:
    retriever.focus = focus
    try:
        for question in (QUESTION, "rejection sampler draft probs target probs", "filler line about nothing"):
            hits = retriever.search(question, 10, "lexical", precision=True)
            assert hits
            for h in hits:
                text = (Path(retriever.index.manifest["repo_path"]) / h.file_path.removeprefix("repo/")).read_text()
                assert 0 <= h.start < h.end <= len(text)
                assert h.end - h.start <= 2000
                if focus:
                    assert h.end - h.start <= max(focus, 1)
            for i, a in enumerate(hits):
                for b in hits[i + 1 :]:
                    if a.file_path == b.file_path:
                        inter = min(a.end, b.end) - max(a.start, b.start)
                        short, long = sorted((a, b), key=lambda h: h.end - h.start)
                        nested = long.start <= short.start and short.end <= long.end
                        assert inter <= OVERLAP * (short.end - short.start) or (
                            nested and short.end - short.start <= NESTED * (long.end - long.start)
                        )
    finally:
        retriever.focus = 0


def test_blank_query_returns_nothing_with_precision(retriever: Retriever) -> None:
    assert retriever.search("   ", 5, "lexical", precision=True) == []
    assert retriever.search_many(["", QUESTION], 5, "lexical", precision=True)[0] == []


def test_recut_leaves_changed_files_alone(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    text = FILLER + EVIDENCE + FILLER
    (repo / "a.md").write_text(text)
    build_index(repo, tmp_path / "index", IndexParams(), display_root="repo", progress=False)
    retriever = Retriever.open(tmp_path / "index")
    texts = IndexedFiles(retriever.index)
    assert texts.get("repo/a.md") == text
    assert texts.get("elsewhere/a.md") is None
    query = analyse("load lora adapter", retriever.index.bm25)
    span = ("repo/a.md", 0, len(text))
    (cut,) = recut([span], query, retriever.index.bm25, texts, 200, lines_tokenizer)
    assert cut[2] - cut[1] <= 200 and "load_lora_adapter" in text[cut[1] : cut[2]]
    (repo / "a.md").write_text(text.replace("filler", "FILLER"))  # same length, new content
    fresh = IndexedFiles(retriever.index)
    assert fresh.get("repo/a.md") is None
    assert recut([span], query, retriever.index.bm25, fresh, 200, lines_tokenizer) == [span]


def test_chunks_of_the_sample_are_long_enough_to_recut() -> None:
    # guards the re-cut tests above: the evidence file must be cut into spans wider than the window
    chunks = chunk_file("a.md", FILLER + EVIDENCE + FILLER, 2000)
    assert max(c.end - c.start for c in chunks) > 400


# ----------------------------------------------------------------------------- definitions

UTILS = '''"""Process helpers."""

import time


def shutdown_workers(procs, timeout=5.0):
    """Terminate every worker process, then wait up to ``timeout`` seconds for each to exit."""
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
'''
ENGINE = '''"""The engine loop."""

from pkg.utils import shutdown_workers


class Engine:
    def close(self):
        shutdown_workers(self.workers)

    def restart(self):
        shutdown_workers(self.spares)
        self.start()
'''
#: A caller that names the function more often than its definition does, among modules defining other names.
DEFINING_REPO = {
    "pkg/utils.py": UTILS,
    "pkg/engine.py": ENGINE,
    **{f"pkg/mod{i}.py": f"def helper_{i}(x):\n    return x + {i}\n\n\nclass Thing{i}:\n    pass\n" for i in range(6)},
}


def test_defined_names_in_every_language_the_chunkers_parse() -> None:
    source = """
def plain(x): ...
    async def waiter():
class Config(Base):
pub fn run(&self) -> i32 {
pub(crate) struct Slot {
impl Scheduler {
trait Policy {
enum Kind {
func Serve(w http.ResponseWriter) {
export function render() {}
export class Widget {}
interface Props {}
type Alias = string;
static inline int helper(void) {
x = define(y)
    value: int = 3
# see def not_a_definition
return classify(z)
"""
    assert defined_names(source) == sorted(
        ["plain", "waiter", "Config", "run", "Slot", "Scheduler", "Policy", "Kind", "Serve", "render", "Widget"]
        + ["Props", "Alias"]
    )
    # a chunk's context (its enclosing signatures) makes it part of the enclosing definitions
    assert defined_names("class ModelConfig:\n    def verify(self) -> None:\n        x = 1") == [
        "ModelConfig",
        "verify",
    ]


@pytest.fixture(scope="module")
def defining_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index of :data:`DEFINING_REPO` (each test opens its own retriever on it)."""
    return indexed(tmp_path_factory.mktemp("defining"), DEFINING_REPO)


def test_the_index_holds_what_every_chunk_defines(defining_index: Path) -> None:
    index = Retriever.open(defining_index).index
    assert index.definitions.num_docs == len(index.chunks)
    by_path = {index.chunks.span(c)[0]: c for c in range(len(index.chunks))}
    utils, engine = by_path["repo/pkg/utils.py"], by_path["repo/pkg/engine.py"]
    scores = index.definitions.score_docs("shutdown_workers", [utils, engine])
    assert scores[0] > 0 and scores[1] == 0  # engine.py only calls it
    # whole identifiers only: a part of a defined name is not a definition
    assert index.definitions.score_docs("shutdown", [utils]) == [0.0]
    assert index.definitions.score_docs("Engine restart", [engine])[0] > 0


def test_the_chunk_that_defines_what_the_question_names_comes_first(defining_index: Path) -> None:
    retriever = Retriever.open(defining_index)
    question = "How long does shutdown_workers wait for the workers?"
    plain = [h.file_path for h in retriever.search(question, 2, "lexical", precision=False)]
    assert plain == ["repo/pkg/engine.py", "repo/pkg/utils.py"]  # the caller says it twice
    assert [h.file_path for h in retriever.search(question, 2, "lexical")] == plain[::-1]
    query = analyse(question, retriever.index.bm25)
    ranked = retriever.lexical.search(question, 10)
    defined = sorted(retriever.precision.defined(query, [c for c, _ in ranked]), reverse=True)
    assert defined[0] > 0 and defined[1] == 0  # one chunk defines it
    assert retriever.precision.defined(analyse("", retriever.index.bm25), [c for c, _ in ranked]) == [0.0] * len(ranked)
    retriever.precision.set_weights([0.0] * (len(COLUMNS) - 1))
    assert [h.file_path for h in retriever.search(question, 2, "lexical")] == plain
    without = Precision(retriever.index.bm25, retriever.index.chunks.paths, retriever.index.chunks.file)
    assert without.defined(query, [c for c, _ in ranked]) == [0.0] * len(ranked)


def test_a_files_definitions_within_a_span_are_those_of_its_text() -> None:
    source = (
        "import os\n\nclass Engine:\n    def step(self):\n        pass\n\n    async def run(self):\n"
        "        return 1\n\ndef main():\n    fn = 1\n"
    )
    defines = Definitions(source)
    line_starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]
    for start in line_starts:
        for end in line_starts[1:] + [len(source)]:
            if end > start:
                assert defines.within(start, end) == defined_names(source[start:end]), (start, end)
    step = source.index("    def step")
    # a chunk inside the class: its context's names and its own
    assert defines.within(step, source.index("\n\n    async")) == ["step"]
    assert defines.within(step, source.index("\n\n    async"), "class Engine:") == ["Engine", "step"]
    assert defines.within(0, len(source)) == ["Engine", "main", "run", "step"]
    assert Definitions("no definitions here").within(0, 19) == []


GO_SOURCE = """package web

// Context carries a request.
type Context struct {
    Keys map[string]any
}

// JSON writes obj as the response body.
func (c *Context) JSON(code int, obj any) {
    c.Render(code, obj)
}

func helper() int {
    return 1
}
"""


def test_parsed_files_define_what_their_parse_finds() -> None:
    # a Go method on a receiver is no "func NAME" line, yet the parse knows it defines JSON
    record = FileRecord("web/context.go", 0, 0, "", [], [], file_symbols("web/context.go", GO_SOURCE))
    defines = definitions_of(record, GO_SOURCE)
    assert isinstance(defines, SymbolDefinitions)
    method = GO_SOURCE.index("// JSON")
    body = GO_SOURCE.index("    c.Render")
    assert defines.within(0, len(GO_SOURCE)) == ["Context", "JSON", "helper"]
    assert defines.within(method, GO_SOURCE.index("func helper")) == ["JSON"]
    # a span inside the method's body lies inside its definition; one running past it does not
    assert defines.within(body, body + 5) == ["JSON"]
    assert defines.within(body, len(GO_SOURCE)) == ["helper"]
    assert Definitions(GO_SOURCE).within(0, len(GO_SOURCE)) == ["Context", "helper"]
    # a file without a grammar keeps the definition lines (Markdown's code blocks)
    prose = "# Guide\n\n```python\nclass Engine:\n    pass\n```\n"
    text_record = FileRecord("guide.md", 0, 0, "", [], [], file_symbols("guide.md", prose))
    assert definitions_of(text_record, prose).within(0, len(prose)) == ["Engine"]


def test_a_symbol_query_ranks_the_chunk_that_opens_the_definition_first(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    body = "".join(f"        self.retries_{i} = max_retries + {i}  # adapter retry slot\n" for i in range(60))
    adapters = (
        "class BaseAdapter:\n    pass\n\n\n"
        "class HTTPAdapter(BaseAdapter):\n    '''The transport adapter.'''\n\n"
        "    def __init__(self, max_retries=0):\n" + body + "\n"
        "    def send(self, request):\n        return HTTPAdapter.build(request)  # HTTPAdapter HTTPAdapter\n"
    )
    (repo / "lib" / "adapters.py").write_text(adapters)
    (repo / "lib" / "sessions.py").write_text(
        "from lib.adapters import HTTPAdapter\n\n\ndef mount():\n    return HTTPAdapter(), HTTPAdapter()\n"
    )
    build_index(
        repo, tmp_path / "index", IndexParams(max_chunk_size=600, target_size=600), display_root="repo", progress=False
    )
    retriever = Retriever.open(tmp_path / "index")
    head = adapters.index("class HTTPAdapter")
    heads = retriever.precision.heads
    assert heads is not None
    grades = heads("HTTPAdapter")
    chunks = retriever.index.chunks
    holding = {c for c in range(len(chunks)) if chunks.start[c] <= head < chunks.end[c] and chunks.file[c] == 0}
    assert grades and {c for c, g in grades.items() if g == 1.0} == holding
    for typed in ("HTTPAdapter", "httpadapter"):  # the same lookup typed in lower case
        first = retriever.search(typed, 5, "lexical")[0]
        assert first.file_path == "repo/lib/adapters.py" and first.start <= head < first.end, typed
    assert heads("httpadapter") == {c: 1.0 if g == 1.0 else 0.5 for c, g in grades.items()}  # lowercase: no case
    # not one name: no definition is looked up
    assert heads("how adapters retry") == {}
    # a question about the name alone, in any form, finds the same definition first
    for asked in (
        "How does HTTPAdapter work?",
        "Which module defines `HTTPAdapter`?",
        "what is the HTTPAdapter",
        '"HTTPAdapter",',
        "Explain HTTPAdapter",
        "explain how HTTPAdapter works",
        "Please show me where HTTPAdapter is defined",
        "the HTTPAdapter class",
        "HTTPAdapter definition",
    ):
        first = retriever.search(asked, 5, "lexical")[0]
        assert first.file_path == "repo/lib/adapters.py" and first.start <= head < first.end, asked


def test_the_shipped_ranker_file_is_small_and_read_once() -> None:
    from fastrag.retrieval import precision

    shipped = Path(precision.__file__).with_name(precision.RANKER_FILE)
    assert shipped.stat().st_size < 1_000_000
    assert precision.shipped_weights() is precision.shipped_weights()  # loaded once per process


@pytest.mark.parametrize(
    "damage",
    [
        None,  # missing
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: text.replace('"columns"', '"features"'),  # another ranker's
        lambda text: json.dumps({**json.loads(text), "columns": json.loads(text)["columns"][:-1]}),  # other columns
        lambda text: json.dumps({**json.loads(text), "weights": json.loads(text)["weights"][:-1]}),  # a weight short
        lambda text: json.dumps({**json.loads(text), "weights": [-1.0] + json.loads(text)["weights"][1:]}),
        lambda text: text.replace(json.dumps(json.loads(text)["weights"][1]), '"NaN"', 1),
    ],
)
def test_a_damaged_ranker_file_is_one_clear_error_naming_it(
    tmp_path: Path, damage: Callable[[str], str] | None
) -> None:
    from fastrag.retrieval import precision

    text = Path(precision.__file__).with_name(precision.RANKER_FILE).read_text(encoding="utf-8")
    target = tmp_path / "ranker.json"
    if damage is not None:
        target.write_text(damage(text), encoding="utf-8")
    with pytest.raises(precision.RankerFileError, match=str(target)):
        precision.load_weights(target)
    good = tmp_path / "good.json"
    good.write_text(text, encoding="utf-8")
    assert tuple(precision.load_weights(good)) == precision.COLUMNS


#: A test framework's own library named like a test, sourced by its runner; its own tests in a test folder;
#: and Go tests beside the code they test, which nothing names.
FRAMEWORK_REPO = {
    "lib/core/test_functions.bash": (
        "# the functions a test file calls\nskip() {\n  echo skipped the current test case\n}\n"
        "load() {\n  source helper files relative to the test file\n}\n"
    ),
    "bin/runner": '#!/usr/bin/env bash\nsource "$ROOT/lib/core/test_functions.bash"\nrun_all_cases "$@"\n',
    "test/skip.bats": "@test 'skip marks the test case as skipped' {\n  skip\n  echo skipped test case\n}\n",
    "pkg/mode.go": "package pkg\n\n// SetMode sets the mode\nfunc SetMode(m string) { mode = m }\n",
    "pkg/mode_test.go": 'package pkg\n\nfunc TestSetMode(t *testing.T) { SetMode("debug") }\n',
    # a build file lists the tests it runs: naming a test so does not make it product code
    "src/parse_test.cc": '#include "src/parse.h"\nTEST(Parse, Empty) { EXPECT_TRUE(Parse("")); }\n',
    "src/parse.h": "bool Parse(const char* text);\n",
    "CMakeLists.txt": "add_executable(parse_test src/parse_test.cc)\nadd_test(NAME parse_test COMMAND parse_test)\n",
    "BUILD.bazel": 'cc_test(\n    name = "parse_test",\n    srcs = ["src/parse_test.cc"],\n)\n',
}


def test_a_test_like_name_that_other_code_sources_is_product_code(tmp_path: Path) -> None:
    retriever = Retriever.open(indexed(tmp_path, FRAMEWORK_REPO))
    stage = retriever.precision
    chunks = retriever.index.chunks
    by_path = {chunks.paths[chunks.file[c]].split("repo/", 1)[1]: chunks.file[c] for c in range(len(chunks))}
    tests = {path: stage.is_test(f, path_kind(path)) for path, f in by_path.items()}
    assert tests == {
        "lib/core/test_functions.bash": False,  # sourced by bin/runner
        "bin/runner": False,
        "test/skip.bats": True,  # a test folder
        "pkg/mode.go": False,
        "pkg/mode_test.go": True,  # nothing names it
        "src/parse_test.cc": True,  # only build files name it
        "src/parse.h": False,
        "CMakeLists.txt": False,
        "BUILD.bazel": False,
    }
    hits = [h.file_path for h in retriever.search("the skip function for the current case", 3, "lexical")]
    assert hits[0].endswith("lib/core/test_functions.bash"), hits
    # without reading the repository, the name alone would have decided
    blind = Precision(retriever.index.bm25, chunks.paths, chunks.file)
    assert blind.is_test(by_path["lib/core/test_functions.bash"], path_kind("lib/core/test_functions.bash"))


def test_the_repository_trait_is_the_share_of_its_spans_that_documentation_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "docs" / "retries.md").write_text(
        "".join(f"# Retries {i}\n\nRetry the request {i} times.\n\n" for i in range(8))
    )
    (repo / "lib" / "retry.py").write_text(
        "".join(f"def retry_{i}(request):\n    return request\n\n\n" for i in range(150))
    )
    build_index(
        repo, tmp_path / "index", IndexParams(max_chunk_size=300, target_size=300), display_root="repo", progress=False
    )
    retriever = Retriever.open(tmp_path / "index")
    chunks = retriever.index.chunks
    pages = sum(chunks.paths[chunks.file[c]].endswith(".md") for c in range(len(chunks)))
    stage = retriever.precision
    share = pages / len(chunks)
    assert 0 < share < precision.PROSE_CAP and stage.prose_share == pytest.approx(share)
    # a share past those the weights were fitted on counts as the cap
    monkeypatch.setattr(precision, "PROSE_CAP", share / 2)
    assert Retriever.open(tmp_path / "index").precision.prose_share == pytest.approx(share / 2)
    for text, prose, asked in (
        ("retry the request", stage.prose_share, 0.0),
        ("How do I retry the request?", 0.0, stage.prose_share),
    ):
        query = analyse(text, retriever.index.bm25)
        traits = stage.traits(query, stage.features(query, retriever.lexical.search(query.text, 10)))
        # the repository's share of pages, for a few words and for a direct question each a trait of its own
        assert len(traits) == len(TRAITS) and traits[TRAITS.index("prose")] == prose, text
        assert traits[TRAITS.index("asked_prose")] == asked, text


SPREAD_REPO = {
    "web/jar.py": "\n\n".join(
        f"def cookie_step_{i}(jar):\n    '''Cookie storage step {i}: keep the cookie in storage.'''\n"
        + "    cookie = jar.cookie\n    storage = jar.storage\n" * 30
        + f"    return storage.keep(cookie, {i})\n"
        for i in range(6)
    ),
    "web/persist.py": "def save_cookie(storage, cookie):\n    '''Write one cookie to its storage.'''\n"
    + "    storage.write(cookie)\n" * 20,
    "web/other.py": "def unrelated():\n    return 1\n",
    "web/session.py": "class CookieJar:\n    pass\n",
}


def test_a_question_that_asks_for_files_is_spread_and_weighed_as_keywords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = Retriever.open(indexed(tmp_path, SPREAD_REPO))

    def files(query: str) -> list[str]:
        return [h.file_path.rsplit("/", 1)[1] for h in retriever.search(query, 4, "lexical")]

    where = "Where is cookie storage handled?"
    named = "How does cookie_step_1 keep cookie storage?"
    spread = {q: files(q) for q in (where, named)}
    monkeypatch.setattr(retriever_module, "ASKED_SPREAD", 1.0)
    kept = {q: files(q) for q in (where, named)}
    assert kept[where][:2] == ["jar.py", "jar.py"], kept  # unspread, the one file's spans come first
    assert spread[where][:2] == ["jar.py", "persist.py"], spread  # asked where: the files that hold it
    assert spread[named] == kept[named], (spread, kept)  # a named thing: its passages, as ranked
    # the ranker weighs a question that asks for files as it weighs keywords: its `asks` trait is off
    stage = retriever.precision

    def asks(text: str) -> float:
        query = analyse(text, retriever.index.bm25)
        return stage.traits(query, stage.features(query, retriever.lexical.search(query.text, 10)))[0]

    assert TRAITS[0] == "asks" and asks(where) == 0.0 and asks(named) == 1.0
    # a name the index defines names that thing in any case; plain words do not
    assert retriever.names_code("where does the cookiejar keep cookies")
    assert not retriever.names_code("where does the cookie jar keep cookies")


CASES_REPO = {
    "conv/json_converter.py": 'class JsonConverter:\n    """Reads JSON text into objects."""\n\n'
    "    def read_json(self, text):\n        return parse_json(text)\n",
    "conv/types.py": "class TypeFactory:\n    pass\n\n\ndef typeFactory():\n    return TypeFactory()\n\n\n"
    "def make_types():\n    return typeFactory()\n\n\nclass Other:\n    def typeFactory(self):\n        return 2\n",
    "conv/notes.py": 'def json_notes():\n    """Notes on reading json and converters."""\n    return 1\n',
}


def test_a_name_typed_in_another_case_is_read_as_defined(tmp_path: Path) -> None:
    """A word that spells, in another case, a name in code the index defines is searched as that name: the
    same results as the name typed right, whatever the case it was typed in."""
    retriever = Retriever.open(indexed(tmp_path, CASES_REPO))
    right = "how does the JsonConverter read json"
    for typed in ("how does the jsonconverter read json", "HOW DOES THE JSONCONVERTER READ JSON", right.title()):
        assert retriever.searched(typed).split()[3] == "JsonConverter", typed
        assert retriever.search(typed, 5, "lexical") == retriever.search(right, 5, "lexical"), typed
    assert retriever.searched(right) == right
    # a name defined in two spellings: either typed as defined stays; another case reads as the commoner one
    assert retriever.searched("TypeFactory made") == "TypeFactory made"
    assert retriever.searched("typeFactory made") == "typeFactory made"
    assert retriever.searched("typefactory made") == "typeFactory made"
    assert retriever.searched("TYPEFACTORY made") == "typeFactory made"
    # a word typed in the shape of a name stays as typed, though the index defines it in another case
    assert retriever.searched("the Typefactory and jsonConverter") == "the typeFactory and jsonConverter"
    # words that spell no such name (plain words, a name of one hump) are read as typed
    assert retriever.searched("Json Converter other") == "Json Converter other"
    assert retriever.names_code("where is the jsonconverter") and not retriever.names_code("where is the json")
    retriever.respell = False
    assert retriever.searched("how jsonconverter reads") == "how jsonconverter reads", "respelling off: as typed"


def test_keywords_that_name_code_keep_more_of_its_file(tmp_path: Path) -> None:
    retriever = Retriever.open(indexed(tmp_path, SPREAD_REPO))

    def files(query: str) -> list[str]:
        return [h.file_path.rsplit("/", 1)[1] for h in retriever.search(query, 4, "lexical")]

    words, named = "cookie storage", "cookie_step_1 cookie storage"
    spread = {q: files(q) for q in (words, named)}
    retriever.named_spread = retriever.spread  # keywords that name code spread as other keywords do
    alike = {q: files(q) for q in (words, named)}
    assert spread[words] == alike[words] and spread[words][:2] == ["jar.py", "persist.py"], spread
    # the named thing's file keeps its further spans above the other files that share the words
    assert alike[named][:2] == ["jar.py", "persist.py"], alike
    assert spread[named][:2] == ["jar.py", "jar.py"], spread


def _schema_module(words: str) -> str:
    """A module of a schema library whose parser's docstring says ``words``."""
    return f'''"""Schemas."""


class ZodType:
    def parse(self, data):
        """{words}"""
        return self.check(data)
'''


VERSIONS_REPO = {
    # the older copy says more of the query's words, so BM25 puts it first
    "src/v3/types.py": _schema_module("parse input: validates input, parse input again, parse the input value"),
    "src/v4/types.py": _schema_module("parse input and validate it"),
    "lib/notes.py": "# unrelated\n" + FILLER,
}


def test_an_older_version_kept_beside_a_newer_one_comes_after_it(tmp_path: Path) -> None:
    """The newer copy of code kept beside an older one comes first, unless the query names the older version."""
    retriever = Retriever.open(indexed(tmp_path, VERSIONS_REPO))

    def files(query: str) -> list[str]:
        return [h.file_path.split("/", 2)[2] for h in retriever.search(query, 2, "lexical")]

    assert retriever.precision.older == {retriever.index.chunks.paths.index("repo/src/v3/types.py"): 3}
    chunks = retriever.index.chunks
    best = retriever.lexical.search("parse input", 1)[0][0]
    assert chunks.paths[chunks.file[best]] == "repo/src/v3/types.py"  # BM25 alone prefers the older copy
    for query in ("parse input", "How does ZodType parse input?", "parse input."):
        assert files(query) == ["v4/types.py", "v3/types.py"], query
    for query in ("parse input in v3", "How did version 3 parse input?"):
        assert files(query) == ["v3/types.py", "v4/types.py"], query
