"""One entry point for retrieval: questions in, ranked spans out."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fastrag import _core
from fastrag.config import DEFAULT_INDEX_DIR, DEFAULT_MODE, DEFAULT_MODELS_DIR, MODES
from fastrag.errors import UsageError, UserError
from fastrag.indexing.catalog import open_index
from fastrag.indexing.generations import ChunkTable, LoadedIndex
from fastrag.indexing.reading import IndexedFiles
from fastrag.retrieval.evidence import asks_directly, asks_for_passage, names_identifier, names_version
from fastrag.retrieval.fusion import MARGIN_WEIGHT, RRF_C, order_head, rrf
from fastrag.retrieval.lexical import LexicalSearcher
from fastrag.retrieval.precision import DEPTH as PRECISION_DEPTH
from fastrag.retrieval.precision import FOCUS, Precision, recut
from fastrag.retrieval.query import analyse, asks_where, searched_text, with_apostrophes
from fastrag.retrieval.symbols import CodeNames, DefinitionHeads, code_names
from fastrag.schemas import MinimalSource

if TYPE_CHECKING:
    from fastrag.indexing.embed import Embedder
    from fastrag.retrieval.batching import Combiner
    from fastrag.retrieval.query import Query


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved span: ``text[start:end]`` of ``file_path``, with its score."""

    file_path: str
    start: int
    end: int
    score: float


#: Candidates fetched per result wanted, so that de-duplication can still fill ``k``.
OVERFETCH = 3
#: Two spans of a file are duplicates when they share more than this share of the shorter.
OVERLAP = 0.3
#: ... unless one lies inside the other and is at most this share of its length. Spans match a
#: passage when their IoU with it exceeds 0.05, so a span twenty times longer than a passage
#: inside it does not stand for that passage: a section layer of a heading and a line, or a
#: one-line heading section, inside a 1,000-character chunk (see :func:`nested_first`).
NESTED = 0.05
#: How deep each retriever's list goes into the fusion, and the weight of each list (selected out of
#: fold on the pooled public and dev questions, benches/RESULTS.md "Cross-validation").
FUSION_DEPTH = 50
LEXICAL_WEIGHT = 1.0
VECTOR_WEIGHT = 0.25
#: Vectors join the fusion only when their best cosine reaches this: below it they are
#: guessing (nonsense queries top out near 0.31), and equal-weight fusion of weak vector
#: lists cost 0.17 code R@1 on the public set.
VECTOR_GATE = 0.6
#: Each further span of a file counts this much less than the one before it among the results of a
#: query not put as a direct question (a few keywords, an identifier, a description of code: it asks
#: where things are, and several files answer it better than one file's many spans); a direct
#: question asks for the passage that answers it, often the second or third span of the best file. Selected out of fold
#: on the pooled vLLM questions and benchmark repositories (benches/RESULTS.md, "Cross-validation by
#: repository": 0.3 in every fold once the keywords form had weights of its own; 0.7 before).
SPREAD = 0.3
#: What a span of a file kept beside a newer version of itself (``src/v3/`` beside ``src/v4/``) counts, unless
#: the query names its version: the newer copy is the code a question is about, and the older one's span stands
#: to it as a file's further span to its first (benches/RESULTS.md, "Older copies and the frame of a question").
OLDER = SPREAD
#: The spread of a direct question's files when it names nothing in code and asks where something is, or
#: finds only code among its first stage's best candidates (``how does dependency injection work``): it
#: asks which code holds a concept, and the files that do answer it better than the passages of one
#: (benches/RESULTS.md, "Questions that ask for files"). Gentler than :data:`SPREAD`: the passage it
#: wants may be a file's second.
ASKED_SPREAD = 0.5
#: The spread of a query not put as a direct question that names something in code
#: (``get_num_new_matched_tokens NIXLConnector return``): like a direct question naming it, it asks for
#: the passage about the named thing, often a further span of the file that defines it, more than for
#: the files that share its words. Selected out of fold (benches/RESULTS.md, "Keywords that name code").
NAMED_SPREAD = 0.7
#: Chunks the precision stage reads to tell whether other code names a file with a test-like name.
MENTIONS = 64
#: Whether searches run the precision stage (:mod:`fastrag.retrieval.precision`) unless told otherwise:
#: on, since in every mode it raised recall on both public sets at some k and lowered it at none
#: (benches/RESULTS.md, "Ablation").
PRECISION = True


class Retriever:
    """Searches a loaded index; build one with :meth:`open`.

    The embedding model is loaded on the first vector or hybrid search, and only when the
    index has vectors; lexical search never imports it. Searches may run on many threads at
    once: their queries are embedded together, in batches (:mod:`fastrag.retrieval.batching`).
    """

    def __init__(self, index: LoadedIndex, models_dir: Path = DEFAULT_MODELS_DIR) -> None:
        self.index = index
        self.lexical = LexicalSearcher(index.bm25)
        #: The index's files, read as they were indexed (:mod:`fastrag.indexing.reading`): every reader
        #: of this index's texts (snippets, spans, prompts, grep, references) shares them.
        self.files = IndexedFiles(index)
        self._code_names: CodeNames | None = None
        heads = DefinitionHeads(index, self.files.get)
        self.precision = Precision(
            index.bm25,
            index.chunks.paths,
            index.chunks.file,
            index.definitions,
            heads=heads.grades,
            mentions=self._mentions,
            names_code=self.names_code,
        )
        #: Width the precision stage re-cuts returned spans to (0: spans as chunked; see
        #: :mod:`fastrag.retrieval.precision` for why that is the default).
        self.focus = FOCUS
        #: The fusion: the vector list's weight and the best cosine it needs to join (:data:`VECTOR_WEIGHT`,
        #: :data:`VECTOR_GATE`), how deep each list goes (:data:`FUSION_DEPTH`) and the RRF constant
        #: (:data:`~fastrag.retrieval.fusion.RRF_C`); ``benches/cv_grid.py`` selects them out of fold.
        self.vector_weight = VECTOR_WEIGHT
        self.vector_gate = VECTOR_GATE
        self.fusion_depth = FUSION_DEPTH
        self.rrf_c = RRF_C
        #: Weight of the lexical margin in the order of the first fused results (:func:`order_head`).
        self.margin_weight = MARGIN_WEIGHT
        #: How much each further span of a file already ranked counts, for a query that is not asked
        #: as a full question (:func:`spread_files`); 1.0 leaves the order alone.
        self.spread = SPREAD
        #: The same for such a query that names something in code (:data:`NAMED_SPREAD`).
        self.named_spread = NAMED_SPREAD
        #: Whether a query's words the index holds no spelling of are read as the nearest it holds
        #: (:meth:`respelled`); off, a query is searched as typed (``benches/typos.py`` measures both).
        self.respell = True
        self.models_dir = models_dir
        self._embedder: Embedder | None = None
        self._query_vectors: Combiner[str] | None = None
        self._embedder_lock = threading.Lock()

    @classmethod
    def open(
        cls, index_dir: Path = DEFAULT_INDEX_DIR, models_dir: Path = DEFAULT_MODELS_DIR, repos: Sequence[str] = ()
    ) -> Retriever:
        """Load the live index of ``index_dir``: of a sharded index, every shard (or those named in
        ``repos``) as one (:func:`fastrag.indexing.catalog.open_index`)."""
        return cls(open_index(index_dir, repos), models_dir)

    def search(
        self, query: str, k: int, mode: str = DEFAULT_MODE, precision: bool | None = None, allowed: bytes | None = None
    ) -> list[Hit]:
        """The ``k`` best spans for ``query``; empty for a blank query or ``k <= 0``."""
        return self.search_many([query], k, mode, precision, allowed)[0]

    def search_many(
        self,
        queries: Sequence[str],
        k: int,
        mode: str = DEFAULT_MODE,
        precision: bool | None = None,
        allowed: bytes | None = None,
    ) -> list[list[Hit]]:
        """:meth:`search` for many queries at once (batched: one native call, one model call).

        ``mode`` is ``lexical``, ``vector`` or ``hybrid``; ``hybrid`` on an index without
        vectors is lexical. ``precision``: run the precision stage on each retriever's
        candidates before fusion (default :data:`PRECISION`). ``allowed``: one byte per chunk, nonzero
        where it may be returned (:meth:`fastrag.retrieval.filters.SearchFilter.mask`); ``None``: any.
        """
        precise = PRECISION if precision is None else precision
        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if k <= 0:
            return [[] for _ in queries]
        clean = [self.searched(q) for q in queries]
        if mode == "vector" and not self.index.has_vectors:
            if int(self.index.manifest.get("vectors_pending") or 0):
                raise UserError(
                    f"the index in {self.index.path.parent} has no vectors yet (an index build is making them, "
                    "or `index` finishes them): search lexical or hybrid meanwhile"
                )
            raise UserError(f"the index in {self.index.path.parent} has no vectors: re-run `index` with vectors")
        chunks = self.index.chunks
        depth = max(k * OVERFETCH, self.fusion_depth) if mode == "hybrid" else k * OVERFETCH
        if precise:
            depth = max(depth, PRECISION_DEPTH)
        lexical = self.lexical.search_many(clean, depth, allowed) if mode != "vector" else None
        places = self.heading_hits(clean, k, allowed)
        vector = (
            self._vector_lists(clean, depth, mode, allowed) if mode != "lexical" and self.index.has_vectors else None
        )
        results: list[list[Hit]] = []
        for i, query in enumerate(clean):
            if not query:
                results.append([])
                continue
            lex = lexical[i] if lexical is not None else None
            vec = vector.get(i) if vector is not None else None
            weak = vec is not None and lex is not None and (not vec or vec[0][1] < self.vector_gate)
            first = lex if lex is not None else vec
            decay = self.spread_of(query, self.precision.docs_lead(first or []))
            analysed = analyse(query, self.index.bm25) if precise else None
            if analysed is not None:
                lex = self.precision.rerank(analysed, lex) if lex is not None else None
                vec = self.precision.rerank(analysed, vec) if vec is not None else None
            if vec is None or weak:
                ranked = lex if lex is not None else []
            elif lex is None:
                ranked = vec
            else:
                ranked = rrf(
                    [[cid for cid, _ in lex], [cid for cid, _ in vec]],
                    weights=[LEXICAL_WEIGHT, self.vector_weight],
                    c=self.rrf_c,
                )
                ranked = order_head(ranked, lex, self.margin_weight)
            ranked = nested_first(ranked, chunks)
            ranked = self.weigh_files(ranked, query, decay)
            hits: Iterator[Hit] = (Hit(*chunks.span(cid), score) for cid, score in ranked)
            if analysed is not None and self.focus > 0:
                hits = iter(self._recut(distinct(hits, k * OVERFETCH), analysed))
            if i in places:
                hits = interleave(places[i], hits)
            results.append(distinct(hits, k))
        return results

    def searched(self, query: str) -> str:
        """What is searched for ``query``: the query cleaned (:func:`clean_query`), then respelled
        (:meth:`respelled`). Every caller that reports or searches a query reads it here."""
        return self.respelled(clean_query(query))

    def respelled(self, query: str) -> str:
        """``query`` with each word typed in another case than a name the index defines read as that name
        (:meth:`CodeNames.respelled`: "jsonconverter" is ``JsonConverter``), then each word the index holds no
        spelling of read as the nearest one it holds, one slip of the keys away
        (:meth:`fastrag._core.Bm25Index.respell`): "StaetManager" is ``StateManager``."""
        if not self.respell:
            return query
        query = self.code_names.respelled(query)
        return self.index.bm25.respell(query) or query

    def spread_of(self, query: str, docs_lead: float) -> float:
        """How much each further span of a file counts among ``query``'s results, by this retriever's
        settings (:func:`file_spread`, with :meth:`names_code`)."""
        return file_spread(query, docs_lead, self.names_code, self.spread, self.named_spread)

    def weigh_files(
        self, ranked: list[tuple[int, float]], query: str, decay: float, pages: bool = True
    ) -> list[tuple[int, float]]:
        """``ranked`` (chunk id, score; best first) weighed by what each file is to ``query``: a file kept beside
        a newer version of itself counts :data:`OLDER` unless ``query`` names its version (:func:`demote_files`),
        then the spans are spread over the files by ``decay`` (:func:`spread_files`; ``pages``: a page's sections
        left alone, as search does; ``False`` spreads them as a code file's, as the ranker's weights were climbed)."""
        file_of = self.index.chunks.file
        older = self.precision.older
        if older:
            named = {number for number in set(older.values()) if names_version(query, number)}
            ranked = demote_files(ranked, file_of, {f for f, number in older.items() if number not in named}, OLDER)
        if decay >= 1.0:
            return ranked
        return spread_files(ranked, file_of, decay, self.precision.pages if pages else None)

    def names_code(self, query: str) -> bool:
        """Whether ``query`` names something in code: a word shaped as a name in code
        (:func:`~fastrag.retrieval.evidence.names_identifier`), or one that spells, in any case, such a name
        the index defines (:func:`~fastrag.retrieval.symbols.code_names`: ``modelrunner``)."""
        return names_identifier(query) or self.code_names.named_in(query)

    @property
    def code_names(self) -> CodeNames:
        """The names this index defines (:func:`~fastrag.retrieval.symbols.code_names`), read once; none for
        an index of shards, or one built before definitions were kept (words are then read as typed)."""
        if self._code_names is None:
            try:
                self._code_names = code_names(self.index.symbols)
            except UserError:
                self._code_names = CodeNames()
        return self._code_names

    def _mentions(self, term: str) -> list[int]:
        """The chunks that hold the exact index term ``term`` (the first :data:`MENTIONS` of them)."""
        return self.index.bm25.search_tokens([term], MENTIONS)[0]

    def heading_hits(self, queries: list[str], k: int, allowed: bytes | None = None) -> dict[int, list[Hit]]:
        """For each query that asks where something is documented (:func:`asks_where`), its ``k``
        best heading lines, by position of the query; with ``allowed`` (the chunk mask of
        :meth:`search_many`), only heading lines of the files it allows (:meth:`heading_mask`)."""
        asking = [i for i, q in enumerate(queries) if q and asks_where(q)]
        headings = self.index.headings
        if not asking or not len(headings):
            return {}
        paths = self.index.chunks.paths
        mask = None if allowed is None else self.heading_mask(allowed)
        found = headings.bm25.search_batch([queries[i] for i in asking], k, mask)
        return {
            i: [Hit(paths[headings.file[h]], headings.start[h], headings.end[h], score) for h, score in zip(*ranked)]
            for i, ranked in zip(asking, found)
        }

    def heading_mask(self, allowed: bytes) -> bytes:
        """One byte per heading line, 1 where its file passes the filter the chunk mask ``allowed`` stands for.

        A filter is a predicate on a file's path (:class:`~fastrag.retrieval.filters.SearchFilter`),
        so its mask allows all the chunks of a file or none: a heading line is allowed when a chunk
        of its file is.
        """
        chunks = self.index.chunks
        if len(allowed) != len(chunks):
            raise ValueError(f"allowed must hold one byte per document: {len(allowed)} for {len(chunks)}")
        lazy = self.index._lazy
        file_of = lazy.get("file_of")
        if file_of is None:
            file_of = lazy["file_of"] = np.asarray(chunks.file, dtype=np.int64)
        heading_file = lazy.get("heading_file")
        if heading_file is None:
            heading_file = lazy["heading_file"] = np.asarray(self.index.headings.file, dtype=np.int64)
        files = np.zeros(len(chunks.paths), dtype=np.uint8)
        files[file_of[np.frombuffer(allowed, dtype=np.uint8) != 0]] = 1
        mask: bytes = files[heading_file].tobytes()
        return mask

    def _recut(self, hits: list[Hit], query: Query) -> list[Hit]:
        """``hits`` narrowed to :attr:`focus` characters around their densest evidence."""
        bm25 = self.index.bm25

        def tokenize_lines(lines: list[str]) -> list[list[str]]:
            return _core.tokenize_batch(lines, bm25.stopwords, bm25.min_len, bm25.parts, bm25.stem)

        spans = recut(
            [(h.file_path, h.start, h.end) for h in hits], query, bm25, self.files, self.focus, tokenize_lines
        )
        return [Hit(path, lo, hi, h.score) for (path, lo, hi), h in zip(spans, hits)]

    def _vector_lists(
        self, queries: list[str], depth: int, mode: str, allowed: bytes | None = None
    ) -> dict[int, list[tuple[int, float]]]:
        """The vector candidates of each query that gets them, by position: in vector mode every query;
        in hybrid mode those put as direct questions (:func:`~fastrag.retrieval.evidence.asks_directly`).
        A few keywords, an identifier or a description of code ask where code is,
        and the vectors, which cover the documentation's chunks, would only fuse pages back in (on the
        benchmark repositories they cost 0.003 NDCG@10 and an embedding per query; vLLM's questions,
        all full questions, are unchanged; benches/RESULTS.md)."""
        chosen = [i for i, q in enumerate(queries) if q and (mode == "vector" or asks_directly(q))]
        if not chosen:
            return {}
        found = self._vector_search([queries[i] for i in chosen], depth, allowed)
        return dict(zip(chosen, found))

    def _vector_search(
        self, queries: list[str], depth: int, allowed: bytes | None = None
    ) -> list[list[tuple[int, float]]]:
        vectors = self.index.vectors
        if vectors is None:
            return [[] for _ in queries]
        return vectors.search(self._embed_queries()(queries), depth, allowed=allowed)

    def prepare_vectors(self) -> None:
        """Load the embedding model and run each of its query shapes once now, not on the first searches.

        A server calls this when it loads an index with vectors: loading the model (and a shape's
        slower first call) while it serves held up every search batched behind it. Does nothing
        when the model is already loaded.
        """
        if self.index.has_vectors:
            self._embed_queries(prepare=True)

    def _embed_queries(self, prepare: bool = False) -> Combiner[str]:
        """The embedder's ``embed_queries``, shared by every thread (loaded by the first caller)."""
        combiner = self._query_vectors
        if combiner is not None:
            return combiner
        with self._embedder_lock:
            if self._query_vectors is None:
                from fastrag.indexing.embed import Embedder
                from fastrag.retrieval.batching import Combiner

                embedder = Embedder.resolve(self.models_dir)
                if self.index.embed_model and embedder.model_id != self.index.embed_model:
                    raise UserError("the embedding model differs from the one that built the index: re-run `index`")
                if prepare:
                    embedder.prepare_queries()
                self._embedder = embedder
                self._query_vectors = Combiner(embedder.embed_queries)
            return self._query_vectors


def hits_to_sources(hits: Sequence[Hit]) -> list[MinimalSource]:
    """Hits as the spec's sources (what results files and answers carry)."""
    return [
        MinimalSource(file_path=h.file_path, first_character_index=h.start, last_character_index=h.end) for h in hits
    ]


#: Marks that end a query without changing what it asks: a sentence's last mark, a list's separator, or a
#: label's colon.
_ENDING = "?.!,;:"
#: Marks that open a line of a list or a quote, pasted with the query: a bullet or ``>`` and a blank.
_OPENING = ("- ", "* ", "• ", "> ")
#: Pairs of marks that may enclose a whole query, as a name or a phrase is pasted: quotes and backticks.
_ENCLOSING = (('"', '"'), ("'", "'"), ("`", "`"), ("“", "”"), ("‘", "’"))


def bare_query(query: str) -> str:
    """``query`` without the marks around what it says: blanks, the marks that end it (:data:`_ENDING`), a
    bullet that opens it (:data:`_OPENING`), and quotes or backticks enclosing all of it (:data:`_ENCLOSING`) —
    ``"`ZodType`?"`` and ``- ZodType:`` are ``ZodType``."""
    text = query.strip()
    while True:
        bare = text.rstrip(_ENDING).strip()
        if bare[:2] in _OPENING:
            bare = bare[2:].strip()
        for first, last in _ENCLOSING:
            inner = bare[1:-1]
            if len(bare) > 2 and bare[0] == first and bare[-1] == last and first not in inner and last not in inner:
                bare = inner.strip()
                break
        if bare == text:
            return text
        text = bare


@functools.lru_cache(maxsize=1024)
def clean_query(query: str) -> str:
    """``query`` as valid Unicode, without the marks around it and the request around what it asks for:
    blank becomes empty, undecodable bytes become U+FFFD, the marks :func:`bare_query` drops are dropped,
    and so is a leading "can you find", "show me the", "I'm looking for"
    (:func:`~fastrag.retrieval.query.request_subject`); a request read out of a story is followed by the whole
    message (:func:`~fastrag.retrieval.query.searched_text`); "whats" and "doesnt" are read as "what's" and "doesn't"
    (:func:`~fastrag.retrieval.query.with_apostrophes`).

    Arguments with non-UTF-8 bytes reach Python as lone surrogates (``surrogateescape``), and
    JSON may spell lone surrogates too; neither can cross into Rust as UTF-8. A query means what
    its words say: the same question with or without its question mark is ranked the same, and so is
    a name typed alone or asked for in a sentence. Kept for the last queries read: a served query is read for
    its cache key, its search and the "searched" it reports, and reading a long message is not free.
    """
    text = bare_query(query)
    if not text.strip():
        return ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "replace")
        text = raw.decode("utf-8", "replace")
    return bare_query(searched_text(with_apostrophes(text)))


def distinct(hits: Iterable[Hit], k: int) -> list[Hit]:
    """The first ``k`` hits, skipping any that mostly overlaps a better hit of the same file.

    A hit nested in another (inside it and at most :data:`NESTED` of its length, or the other
    way round) is not its duplicate: the longer span cannot stand for the shorter one.
    """
    kept: list[Hit] = []
    if k <= 0:
        return kept
    for hit in hits:
        if not any(_overlaps(hit, other) for other in kept):
            kept.append(hit)
            if len(kept) == k:
                break
    return kept


def interleave(first: Iterable[Hit], second: Iterable[Hit]) -> Iterator[Hit]:
    """``first[0], second[0], first[1], second[1], ...``, then the rest of the longer.

    A question that asks where something is documented gets its best heading lines and its best
    chunks in turn: the line names the place, the chunk holds what is said there, and the
    question's words rarely tell which of the two its answer is.
    """
    for pair in itertools.zip_longest(first, second):
        yield from (hit for hit in pair if hit is not None)


def nested_first(ranked: list[tuple[int, float]], chunks: ChunkTable) -> list[tuple[int, float]]:
    """``ranked`` (chunk id, score; best first) with each chunk nested in a better one moved up.

    A chunk nested in a better-ranked chunk (inside it and at most :data:`NESTED` of its length:
    a short Markdown section or a heading line inside a 1,000-character chunk) comes right
    after the first chunk that holds it, at most one per holder; its score is unchanged. Such a
    chunk matched the question on its own, so it is where in the longer span the question
    points, and :func:`distinct` keeps both. Measured on the public sets: one docs question
    (a 40-character passage) found at rank 4-5 instead of never, no question lost in the first
    ten results; code files have no nested chunks, so code results are unchanged.
    """
    if len(ranked) < 2:
        return ranked
    start, end, file_of = chunks.start, chunks.end, chunks.file
    sizes = [end[cid] - start[cid] for cid, _ in ranked]
    limit = NESTED * max(sizes)
    short = [n for n, size in enumerate(sizes) if size <= limit]
    if not short:
        return ranked
    follower: dict[int, int] = {}  # holder's position -> position of the chunk moved behind it
    moved: set[int] = set()
    for n in short:
        cid = ranked[n][0]
        lo, hi, f = start[cid], end[cid], file_of[cid]
        for m in range(n):
            holder = ranked[m][0]
            if file_of[holder] == f and start[holder] <= lo and hi <= end[holder] and sizes[n] <= NESTED * sizes[m]:
                if m not in follower and m not in moved:
                    follower[m] = n
                    moved.add(n)
                break
    if not follower:
        return ranked
    out: list[tuple[int, float]] = []
    for m, item in enumerate(ranked):
        if m in moved:
            continue
        out.append(item)
        if m in follower:
            out.append(ranked[follower[m]])
    return out


def file_spread(
    query: str,
    docs_lead: float,
    names_code: Callable[[str], bool],
    keywords: float = SPREAD,
    named: float = NAMED_SPREAD,
) -> float:
    """How much each further span of a file counts among ``query``'s results (:func:`spread_files`; 1.0:
    not spread). For a query not put as a direct question: ``named`` when it names something in code
    (``names_code``), else ``keywords``. For a direct question: 1.0 when it asks for a passage,
    :data:`ASKED_SPREAD` when it asks for files (:func:`~fastrag.retrieval.evidence.asks_for_passage`,
    with ``docs_lead`` and ``names_code``)."""
    if not asks_directly(query):
        return named if names_code(query) else keywords
    return 1.0 if asks_for_passage(query, docs_lead, names_code) else ASKED_SPREAD


def demote_files(
    ranked: list[tuple[int, float]], file_of: Sequence[int], files: Collection[int], factor: float
) -> list[tuple[int, float]]:
    """``ranked`` (chunk id, score; best first) with the score of every chunk of ``files`` lowered to ``factor`` of
    itself (:func:`lowered`, as :func:`spread_files` lowers a further span), sorted again (stable)."""
    out = [(cid, lowered(score, factor) if file_of[cid] in files else score) for cid, score in ranked]
    out.sort(key=lambda item: -item[1])
    return out


def lowered(score: float, keep: float) -> float:
    """``score`` lowered by ``1 - keep`` of its size: a positive score multiplied by ``keep``, a negative one (the
    precision stage gives one to a test file) pushed as far below zero, never up."""
    return score - (1.0 - keep) * abs(score)


def spread_files(
    ranked: list[tuple[int, float]], file_of: Sequence[int], decay: float, pages: Sequence[bool] | None
) -> list[tuple[int, float]]:
    """``ranked`` (chunk id, score; best first) with the score of each chunk lowered to ``decay`` of itself once for
    every better chunk of its file (:func:`lowered`), and sorted again (stable: ties keep their order).
    A file that ``pages`` marks as documentation is left alone (``None``: every file is spread): a page's sections
    are passages on one topic, and the one a few words want is often not its best-scored; a code file's further
    spans stand in the way of the other files a query names."""
    seen: dict[int, int] = {}
    out: list[tuple[int, float]] = []
    for cid, score in ranked:
        f = file_of[cid]
        n = seen.get(f, 0)
        if pages is None or not pages[f]:
            seen[f] = n + 1
        out.append((cid, lowered(score, decay**n)))
    out.sort(key=lambda item: -item[1])
    return out


def _overlaps(a: Hit, b: Hit) -> bool:
    """Whether ``a`` and ``b`` are duplicates: same file, sharing more than :data:`OVERLAP` of
    the shorter, and neither nested in the other (:func:`_nested`)."""
    if a.file_path != b.file_path:
        return False
    inter = min(a.end, b.end) - max(a.start, b.start)
    if inter <= OVERLAP * min(a.end - a.start, b.end - b.start):
        return False
    return not (_nested(a, b) or _nested(b, a))


def _nested(inner: Hit, outer: Hit) -> bool:
    """Whether ``inner`` lies inside ``outer`` (same file) and is at most :data:`NESTED` of its length."""
    return (
        inner.file_path == outer.file_path
        and outer.start <= inner.start
        and inner.end <= outer.end
        and inner.end - inner.start <= NESTED * (outer.end - outer.start)
    )
