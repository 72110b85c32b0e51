"""The precision stage: re-rank a retriever's candidates, optionally re-cut their spans.

The first stage (BM25, vectors) ranks ~2,000-character chunks on their own. One signal it
cannot see decides many of the questions it gets wrong:

* **the file's name** — "the rejection sampler", "vLLM's serve benchmark", "DeepSeek model's
  forward method": the question names the module, and a test file or a copy elsewhere that
  mentions the same words more often outranks it. A candidate whose file name (without
  extension: ``rejection_sampler``, ``serve``, ``deepseek``) is spelt out by the question gets a
  bonus of ``name_weight`` × the name's idf relative to the largest idf of the index, so a
  distinctive name counts and ``utils`` hardly does. The question's words count with their
  identifier variants (:func:`fastrag.retrieval.query.identifier_variants`: "DeepSeek model" also
  spells ``deepseekmodel``). A second feature asks only that each part of the name be spelt in some
  form ("routing" names ``Router.php``, "authentication" ``auth.py``): a question seldom uses a file's very word.

* **what the chunk defines** — "the shutdown helper in vllm/v1/utils.py", "the default
  ``lora_int_id`` value", "``Gemma3nAttention``'s softmax scale": among chunks that all mention the
  named identifier (its callers, its tests, the file's other functions), the one that *defines*
  it, or lies inside its definition, is usually the answer. The index holds, for every chunk, the
  names of its ``def`` / ``class`` / ``fn`` / ``struct`` … lines and of its enclosing signatures
  (:func:`fastrag.indexing.texts.defined_names`) as a BM25 document of whole identifiers; a
  candidate's feature is the BM25 score of the question (and its identifier variants) against it,
  relative to the largest idf of that index, so that a name defined in many chunks (``forward``,
  ``__init__``) counts for little. Questions that spell no identifier score 0 everywhere.

* **what the file is and what the question's form asks for** (:mod:`fastrag.retrieval.evidence`):
  for a query not asked as a full question, the share of its words that name the file or its folder
  (``cookie storage`` → ``cookies.py``); whether the file is a test or an example; whether it is documentation met by a
  query not asked as a full question (a few keywords or an identifier ask where code is; a full
  question may well want the page that explains it); and, for a query that is one identifier,
  whether the chunk defines that very name.

* **the candidate's file among the candidates** — for keywords, the sum of the first-stage scores of
  the file's candidates (relative to the best file's) and how many it has: a file much of the query's
  evidence comes from is what the query is about.

* **where the candidate stands among the others** — its place in the first stage's list, and how far its
  definitions, path-words and file-name evidence lie below the best candidate's: the same evidence means
  more when no other candidate has more (a few keywords name one file; a long question names several).

The new score of a candidate is ``score / best score + Σ weight × feature`` over
:data:`FEATURES` (a linear ranker), with weights that are a linear function of the query's
:data:`TRAITS` (what its words ask for, where its evidence lies, how much of the repository is
documentation); the candidates are then sorted again. The weights are learned
by pooled cross-validation (``benches/cv_repos.py``, benches/RESULTS.md "Cross-validation by
repository"), not set by hand.

**Re-cutting** (``focus`` > 0, off by default): each returned span is narrowed to the window of
at most ``focus`` characters (whole lines where they fit) that holds the densest query evidence — the sum over
query terms of idf × a saturated count. Shorter spans can match very short ground truths
(IoU > 0.05 needs a span under 20× the truth's length), but placed a little off they miss longer
ones; on the public sets every width from 400 to 1,500 characters lost more than it gained,
which is why it is off.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import posixpath
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from fastrag import _core
from fastrag.errors import UserError
from fastrag.indexing.reading import IndexedFiles
from fastrag.retrieval.evidence import TRAITS as QUERY_TRAITS
from fastrag.retrieval.evidence import (
    PathKind,
    PathWords,
    Prefixes,
    asked_symbol,
    asks_for_passage,
    lead_phrase,
    names_identifier,
    older_versions,
    path_kind,
    query_traits,
)
from fastrag.retrieval.query import Query

#: The features whose distance below the candidates' best is a feature of its own (``<name>_gap``).
GAPS = ("definitions", "path_words", "file_name")
#: The features of a candidate (:meth:`Precision.features`): its first-stage score / the list's best,
#: the file-name match, the definitions the query names, the share of the query's words that name
#: the file's path, whether the file is a test (:meth:`Precision.is_test`: by its folder, or by its name
#: when no other code of the repository names it), an example, documentation,
#: whether the chunk opens a definition of the name a one-identifier query asks for (graded by how
#: :func:`~fastrag.retrieval.symbols.find_definitions` ranks that definition); then two features of
#: the candidate's *file* among the candidates: the sum of its candidates' first-stage scores
#: (relative to the best file's sum) and how many candidates it has (log-scaled); then where the
#: candidate stands among the others: its place in the first stage's list (log-scaled) and how far its
#: definitions, path-words and file-name evidence lie below the best candidate's (0 for the best); last,
#: whether the query spells every part of the file's name in some form (``name_forms``: "routing" names
#: ``Router.php``, "authentication" ``auth.py``, "certificate verification" ``certs.py``), where ``file_name``
#: asks for the very words; and whether the first phrase the query is about names a part of the file's name
#: in such a form (``lead_name``, :func:`~fastrag.retrieval.evidence.lead_phrase`: "Mutex and Semaphore for
#: coroutine synchronization" names ``Mutex.kt``, not ``Semaphore.kt``), or every part of it (``lead_whole``:
#: "retry middleware and exponential backoff" names ``RetryMiddleware.php`` whole, ``Middleware.php`` too).
FEATURES = (
    "first_stage",
    "file_name",
    "definitions",
    "path_words",
    "test_file",
    "example_file",
    "doc_file",
    "symbol_definition",
    "file_sum",
    "file_count",
    "rank",
    *(f"{name}_gap" for name in GAPS),
    "name_forms",
    "lead_name",
    "lead_whole",
)
_GAPPED = tuple(FEATURES.index(name) for name in GAPS)
_DOC = FEATURES.index("doc_file")
#: The features before the gaps: a candidate's own, its file's, and its place.
_OWN = FEATURES.index("rank") + 1
_ASKS = QUERY_TRAITS.index("asks")
#: What a query asks for and where it is asked (:meth:`Precision.traits`), each in [0, 1]: from its words
#: (:data:`fastrag.retrieval.evidence.TRAITS`: put as a direct question that asks for a passage rather than
#: for files, :func:`~fastrag.retrieval.evidence.asks_for_passage`; naming tests; naming documentation),
#: from the first stage's evidence (``docs_lead``: the share of the ten best
#: candidates' score that documentation holds), and from the repository (``prose``: the share of its
#: indexed spans that documentation holds, for a query not put as a direct question: where pages are
#: many, a page among the candidates says less about what a few words ask for; ``asked_prose``: the same
#: share for a direct question, whose pages lead the candidates wherever pages are many). Never from its
#: punctuation.
TRAITS = (*QUERY_TRAITS, "docs_lead", "prose", "asked_prose")
#: The ranker's columns: the candidate features, then each feature after the first times each trait.
#: A linear ranker over them is a ranker whose weights are a linear function of the query's traits:
#: a direct question may want the page that explains it, a few words the file that implements them,
#: and one weight vector for both cost each side what the other gained (docs/retrieval.md).
COLUMNS = FEATURES + tuple(f"{f}*{t}" for t in TRAITS for f in FEATURES[1:])
#: The largest ``prose`` trait: a repository with more of its spans in documentation counts as this much.
#: The weights were fitted on repositories up to 0.42 (bash-it); a linear weight carried past the shares it
#: saw would push every page of a repository made mostly of pages under its code.
PROSE_CAP = 0.45
#: Candidates that make the first-stage evidence of ``docs_lead``.
LEAD = 10
RANKER_FILE = "ranker.json"
#: Fewest candidates of each retriever the stage re-ranks (so that the first results do not
#: depend on ``k``). 30, 50 and 100 gave the same recall on the public sets with the chunks
#: alone; with the Markdown layers (short sections and table windows, which rank high for
#: model names) 30 lost a code question whose file is only found by its name bonus, 50 did not.
#: On the benchmark repositories a file that names a short query's subject (``cookies.py`` for
#: "cookie storage") often has no chunk among the first 50: out of fold by repository, 150, 300
#: and 600 candidates gave NDCG@10 .833, .838, .838 against .828 (benches/RESULTS.md,
#: "Cross-validation by repository"), vLLM recall within .008.
DEPTH = 300
#: The ``rank`` feature's scale: a candidate's place over the first stage's list, log-scaled so that the
#: last of :data:`DEPTH` candidates is at 1.0.
RANK_SCALE = math.log(DEPTH)
#: Width of re-cut spans in characters; 0 leaves the spans as the chunker cut them.
FOCUS = 0
#: Saturation of a term's count inside a re-cut window (BM25's k1 with no length part).
WINDOW_K1 = 1.2


class RankerFileError(UserError):
    """The ranker's weight file is missing, damaged, or made for other features."""


def load_weights(path: Path | None = None) -> dict[str, float]:
    """The learned weight of every column of :data:`COLUMNS`, from ``path`` (default: the package's
    :data:`RANKER_FILE`); a missing, truncated or foreign file is a :class:`RankerFileError` naming it."""
    source = resources.files("fastrag.retrieval").joinpath(RANKER_FILE) if path is None else path
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
        names, values = raw["columns"], raw["weights"]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise RankerFileError(f"ranker weights {source}: unreadable ({exc.__class__.__name__})") from None
    if not isinstance(names, list) or tuple(names) != COLUMNS or not isinstance(values, list):
        raise RankerFileError(f"ranker weights {source}: not made for this ranker's columns")
    try:
        weights = {name: float(w) for name, w in zip(COLUMNS, values, strict=True)}
    except (TypeError, ValueError):
        raise RankerFileError(f"ranker weights {source}: one weight per column is needed") from None
    if not all(math.isfinite(w) for w in weights.values()) or weights["first_stage"] <= 0:
        raise RankerFileError(f"ranker weights {source}: weights must be finite, the first-stage one positive")
    return weights


@functools.cache
def shipped_weights() -> tuple[float, ...]:
    """The package's weights relative to the first-stage one (:func:`relative_weights`), read once per process."""
    return relative_weights(load_weights())


def relative_weights(weights: Mapping[str, float]) -> tuple[float, ...]:
    """Every column's weight after the first, relative to the first-stage score's weight."""
    first = weights["first_stage"]
    return tuple(weights[c] / first for c in COLUMNS[1:])


class Scorer(Protocol):
    """What the stage needs from the BM25 index."""

    @property
    def num_docs(self) -> int: ...

    def score_docs(self, query: str, doc_ids: Sequence[int]) -> list[float]:
        """BM25 score of each document for ``query``."""
        ...

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` under the index's tokenizer."""
        ...

    def idf(self, term: str) -> float:
        """IDF of an exact index term (0.0 when unknown)."""
        ...


class Precision:
    """Re-ranks candidate chunks (and re-cuts spans) for one index.

    ``paths``: the index's file paths; ``file_of``: the file index of every chunk; ``definitions``:
    the index of the names each chunk defines, one document per chunk (``None``: no chunk defines
    anything). Per-file work (the name's tokens) is cached, so a dataset run pays for each file once.
    """

    def __init__(
        self,
        scorer: Scorer,
        paths: Sequence[str],
        file_of: Sequence[int],
        definitions: Scorer | None = None,
        weights: Sequence[float] | None = None,
        heads: Callable[[str], dict[int, float]] | None = None,
        mentions: Callable[[str], Sequence[int]] | None = None,
        names_code: Callable[[str], bool] = names_identifier,
    ) -> None:
        self.scorer = scorer
        self.heads = heads
        self.mentions = mentions
        self.names_code = names_code
        self.paths = paths
        self.file_of = file_of
        self.definitions = definitions
        self.set_weights(shipped_weights() if weights is None else weights)
        self._max_idf = math.log(1.0 + max(1, scorer.num_docs))
        self._max_definition_idf = math.log(1.0 + max(1, definitions.num_docs)) if definitions is not None else 1.0
        self._names: dict[int, tuple[frozenset[str], float]] = {}
        self._kinds: dict[int, tuple[float, float, float]] = {}
        self._path_words = PathWords(scorer.tokenize)
        self._prose: float | None = None
        self._pages: tuple[bool, ...] | None = None
        self._older: dict[int, int] | None = None

    def set_weights(self, relative: Sequence[float]) -> None:
        """Use other weights: those of :data:`COLUMNS` after the first, relative to the first's (what
        ``benches/cv_repos.py`` fits fold by fold)."""
        if len(relative) != len(COLUMNS) - 1:
            raise ValueError(f"one weight per column of {COLUMNS[1:]} is needed, got {len(relative)}")
        self.weights = tuple(float(w) for w in relative)

    def weights_for(self, traits: Sequence[float]) -> list[float]:
        """The weights of the features after the first for a query of these :data:`TRAITS`: the base
        weights plus each trait times its own block."""
        n = len(FEATURES) - 1
        out = list(self.weights[:n])
        for t, value in enumerate(traits, 1):
            if value:
                block = self.weights[t * n : (t + 1) * n]
                out = [w + value * b for w, b in zip(out, block)]
        return out

    def rerank(self, query: Query, ranked: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
        """``ranked`` (chunk id, score; best first: BM25 scores or cosines) re-scored by the learned
        weights and sorted again, best first."""
        if not ranked or ranked[0][1] <= 0:
            return list(ranked)
        rows = self.features(query, ranked)
        score = np.zeros(len(ranked))
        for column, weight in enumerate(self.weights_for(self.traits(query, rows)), 1):
            if weight:  # a column at a time, in the columns' order: the same sums on every machine
                score += weight * rows[:, column]
        score = rows[:, 0] + score
        ids = np.fromiter((cid for cid, _ in ranked), np.int64, len(ranked))
        return [(int(ids[i]), float(score[i])) for i in np.lexsort((ids, -score))]

    def traits(self, query: Query, rows: np.ndarray) -> tuple[float, ...]:
        """The :data:`TRAITS` of ``query`` with its candidates' ``rows`` (:meth:`features`, best first)."""
        docs = lead_share(rows[:LEAD, 0].tolist(), rows[:LEAD, _DOC].tolist())
        words = list(query_traits(query.text))
        words[_ASKS] = float(asks_for_passage(query.text, docs, self.names_code))
        return (*words, docs, self.prose_share * (1.0 - words[_ASKS]), self.prose_share * words[_ASKS])

    def docs_lead(self, ranked: Sequence[tuple[int, float]]) -> float:
        """The ``docs_lead`` trait of a first stage's ``ranked`` candidates (chunk id, score; best first),
        without their other features."""
        lead = ranked[:LEAD]
        return lead_share([score for _, score in lead], [self._kind(self.file_of[cid])[2] for cid, _ in lead])

    @property
    def pages(self) -> tuple[bool, ...]:
        """Whether each file of the index is documentation (:func:`path_kind`), computed once."""
        if self._pages is None:
            self._pages = tuple(bool(path_kind(p).prose) for p in self.paths)
        return self._pages

    @property
    def older(self) -> dict[int, int]:
        """The index's files kept beside a newer version of themselves, each with its version's number
        (:func:`older_versions`), computed once."""
        if self._older is None:
            self._older = older_versions(self.paths)
        return self._older

    @property
    def prose_share(self) -> float:
        """The share of the index's spans whose file is documentation (:attr:`pages`), at most
        :data:`PROSE_CAP`, computed once."""
        if self._prose is None:
            prose = self.pages
            share = sum(prose[f] for f in self.file_of) / len(self.file_of) if len(self.file_of) else 0.0
            self._prose = min(share, PROSE_CAP)
        return self._prose

    def features(self, query: Query, ranked: Sequence[tuple[int, float]]) -> np.ndarray:
        """The :data:`FEATURES` of every candidate of ``ranked`` (best first, positive best score), one row each.
        What depends on the candidate's file alone is computed once per file."""
        n = len(ranked)
        rows = np.zeros((n, len(FEATURES)))
        if not n:
            return rows
        ids = [cid for cid, _ in ranked]
        file_of = self.file_of
        files, at = np.unique(np.fromiter((file_of[cid] for cid in ids), np.int64, n), return_inverse=True)
        terms = query.all_terms
        words = self._path_words.words(query.subject)
        lead = frozenset(self.scorer.tokenize(" ".join(lead_phrase(query.text))))
        met_words, met_lead = Prefixes(words), Prefixes(lead)
        per_file = np.array(
            [
                (
                    self._match(f, terms),
                    self._path_words.share(words, self.paths[f]),
                    *self._kind(f),
                    self._name_met(f, met_words)[1],
                    *self._name_met(f, met_lead),
                )
                for f in files.tolist()
            ]
        ).reshape(len(files), 8)[at]
        score = np.fromiter((score for _, score in ranked), np.float64, n) / ranked[0][1]
        sums = np.bincount(at, weights=score)  # in the candidates' order, as a running sum per file
        counts = np.bincount(at)
        logs = _log1p(n)
        rows[:, :_OWN] = np.column_stack(
            (
                score,
                per_file[:, 0],
                self.defined(query, ids),
                per_file[:, 1],
                per_file[:, 2:5],
                self.defines_symbol(query, ids),
                sums[at] / max(1.0, float(sums.max())),  # the best candidate alone gives its file 1.0
                logs[counts][at] / logs[n],
                logs[:n] / RANK_SCALE,
            )
        )
        for gap, column in enumerate(_GAPPED, _OWN):
            rows[:, gap] = rows[:, column] - rows[:, column].max()
        rows[:, _OWN + len(_GAPPED) :] = per_file[:, 5:]
        return rows

    @staticmethod
    def columns(rows: np.ndarray, traits: Sequence[float]) -> np.ndarray:
        """Each candidate's :data:`COLUMNS`: its features, then those after the first times each trait
        (what the weights are fitted on)."""
        return np.hstack([rows, *(t * rows[:, 1:] for t in traits)]).reshape(len(rows), len(COLUMNS))

    def defined(self, query: Query, chunk_ids: Sequence[int]) -> list[float]:
        """How strongly each chunk defines what the question names: the BM25 score of the question
        and its identifier variants against the names the chunk defines, relative to the largest idf
        of the definitions index (0 for all without one)."""
        if self.definitions is None or not query.text:
            return [0.0] * len(chunk_ids)
        text = " ".join((query.subject, *query.variants))
        top = self._max_definition_idf
        return [score / top for score in self.definitions.score_docs(text, chunk_ids)]

    def defines_symbol(self, query: Query, chunk_ids: Sequence[int]) -> list[float]:
        """For a query that asks about one identifier (:func:`~fastrag.retrieval.evidence.asked_symbol`),
        each chunk's grade from ``heads`` (:class:`~fastrag.retrieval.symbols.DefinitionHeads`: it holds the
        first line of the name's best definition, of another, or of none); else, and for a stage built
        without ``heads``, 0.0.
        """
        if self.heads is None or (symbol := asked_symbol(query.text, self.names_code)) is None:
            return [0.0] * len(chunk_ids)
        grades = self.heads(symbol)
        return [grades.get(cid, 0.0) for cid in chunk_ids]

    def _kind(self, file_index: int) -> tuple[float, float, float]:
        """Whether the file is a test (:meth:`is_test`), an example, documentation (1.0 or 0.0 each),
        cached per file."""
        cached = self._kinds.get(file_index)
        if cached is None:
            kind = path_kind(self.paths[file_index])
            cached = (float(self.is_test(file_index, kind)), float(kind.example), float(kind.prose))
            self._kinds[file_index] = cached
        return cached

    def is_test(self, file_index: int, kind: PathKind) -> bool:
        """Whether the file is a test: in a test folder, or named as a test (``test_*``, ``*_test.go``,
        ``FooTests.swift``) while no other code file of the repository names it.

        A test is run, never imported: product code that happens to carry a test-like name (a test
        framework's ``test_functions.bash``, a library's public ``test_utils.py``) is named by the code
        that sources or imports it, where a test is named only by tests, pages and the build files that
        list what to run (``CMakeLists.txt``, ``BUILD.bazel``). ``mentions`` (the chunks holding an exact
        index term) reads that from the repository itself; without it the name alone decides.
        """
        if kind.test_folder or not kind.test:
            return kind.test
        tokens = self.scorer.tokenize(file_stem(self.paths[file_index])) if self.mentions is not None else []
        if not tokens or self.mentions is None:
            return True
        for cid in self.mentions(tokens[0]):  # the whole name, as the tokenizer keeps it beside its parts
            other = self.file_of[cid]
            if other != file_index:
                named = path_kind(self.paths[other])
                if not (named.test or named.prose or named.build):
                    return False
        return True

    def name_match(self, chunk_id: int, terms: frozenset[str]) -> float:
        """How strongly ``terms`` spell the name of the chunk's file: its idf relative to the
        index's largest idf when every token of the name is among ``terms``, else 0."""
        return self._match(self.file_of[chunk_id], terms)

    def _name_met(self, file_index: int, words: Prefixes) -> tuple[float, float]:
        """Whether one token of the file's name, and whether every one, meets one of ``words``
        (:meth:`~fastrag.retrieval.evidence.Prefixes.meets`): 1.0 or 0.0 each (``name_forms`` is the second for the
        query's content words, :meth:`PathWords.words`; ``lead_name`` and ``lead_whole`` are both for its lead
        phrase)."""
        tokens, _ = self._name(file_index)
        met = [words.meets(t) for t in tokens]
        return float(any(met)), float(bool(met) and all(met))

    def _match(self, file_index: int, terms: frozenset[str]) -> float:
        tokens, weight = self._name(file_index)
        return weight if tokens and tokens <= terms else 0.0

    def _name(self, file_index: int) -> tuple[frozenset[str], float]:
        cached = self._names.get(file_index)
        if cached is None:
            stem = file_stem(self.paths[file_index])
            tokens = frozenset(self.scorer.tokenize(stem)) if stem else frozenset()
            idf = max((self.scorer.idf(t) for t in tokens), default=0.0)
            cached = (tokens, min(1.0, idf / self._max_idf))
            self._names[file_index] = cached
        return cached


@functools.lru_cache(maxsize=8)
def _log1p(n: int) -> np.ndarray:
    """``log1p`` of 0 to ``n``, each computed as :func:`math.log1p` computes it (numpy's may round otherwise)."""
    return np.array([math.log1p(i) for i in range(n + 1)])


def lead_share(scores: Sequence[float], prose: Sequence[float]) -> float:
    """The ``docs_lead`` trait: the share of the first :data:`LEAD` candidates' first-stage ``scores`` (best
    first) that documentation (``prose`` 1.0) holds; 0.0 when they score nothing."""
    total = sum(scores[:LEAD])
    return sum(s for s, p in zip(scores[:LEAD], prose) if p) / total if total > 0 else 0.0


def file_stem(path: str) -> str:
    """A file's name up to its first dot: ``a/rejection_sampler.py`` → ``rejection_sampler``,
    ``cuda.inc.md`` → ``cuda``; empty for dot files."""
    return posixpath.basename(path).split(".", 1)[0]


def densest_span(
    text: str,
    start: int,
    end: int,
    weights: dict[str, float],
    size: int,
    tokenize_lines: Callable[[list[str]], list[list[str]]],
) -> tuple[int, int]:
    """The window of ``text[start:end]`` of at most ``size`` characters whose pieces hold the
    most query evidence: ``sum(weights[t] * sat(count of t))``, ``sat`` saturating like BM25.

    Pieces are lines; a line longer than a quarter of ``size`` is cut further, after a blank
    where there is one (see :func:`_segments`). ``tokenize_lines`` tokenizes a list of pieces
    (the index's tokenizer). Without evidence, or when the span already fits, the span is
    returned unchanged; the result always lies inside ``[start, end)``.
    """
    if end - start <= size or not weights or size <= 0:
        return start, end
    piece = text[start:end]
    bounds = np.array(_segments(piece, max(1, size // 4)), dtype=np.int64)
    pieces = [piece[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    terms = list(weights)
    column = {t: j for j, t in enumerate(terms)}
    counts = np.zeros((len(pieces) + 1, len(terms)), dtype=np.float64)
    for i, tokens in enumerate(tokenize_lines(pieces), 1):
        for tok in tokens:
            j = column.get(tok)
            if j is not None:
                counts[i, j] += 1.0
    cumulative = np.cumsum(counts, axis=0)
    first = np.arange(len(pieces))
    # the last piece boundary a window starting at each piece reaches without passing `size`
    last = np.searchsorted(bounds, bounds[:-1] + size, side="right") - 1
    last = np.maximum(last, first + 1)
    tf = cumulative[last] - cumulative[first]
    w = np.array([weights[t] for t in terms], dtype=np.float64)
    evidence = (tf * (WINDOW_K1 + 1.0) / (tf + WINDOW_K1)) @ w
    best = int(np.argmax(evidence))
    if evidence[best] <= 0:
        return start, end
    lo = int(bounds[best])
    hi = min(int(bounds[last[best]]), lo + size)
    return start + lo, start + hi


def _segments(text: str, step: int) -> list[int]:
    """Boundaries (from 0 to ``len(text)``) of the lines of ``text``, a line longer than
    ``step`` being cut every ``step`` characters — just after the next blank when one comes
    within ``step``, so that words stay whole."""
    out: list[int] = []
    starts = [*_core.line_starts(text), len(text)]
    for a, b in itertools.pairwise(starts):
        out.append(a)
        pos = a + step
        while pos < b:
            blank = text.find(" ", pos, min(b, pos + step))
            pos = blank + 1 if blank >= 0 else pos
            if pos < b:
                out.append(pos)
            pos += step
    out.append(len(text))
    return out


def recut(
    spans: Sequence[tuple[str, int, int]],
    query: Query,
    scorer: Scorer,
    texts: IndexedFiles,
    size: int,
    tokenize_lines: Callable[[list[str]], list[list[str]]],
) -> list[tuple[str, int, int]]:
    """Every ``(path, start, end)`` narrowed by :func:`densest_span` to ``size`` characters
    around its densest evidence for ``query`` (unchanged when its file cannot be read)."""
    weights = {t: w for t in query.all_terms if (w := scorer.idf(t)) > 0}
    out: list[tuple[str, int, int]] = []
    for path, start, end in spans:
        text = texts.get(path)
        if text is None or end > len(text):
            out.append((path, start, end))
            continue
        lo, hi = densest_span(text, start, end, weights, size, tokenize_lines)
        out.append((path, lo, hi))
    return out
