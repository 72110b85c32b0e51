"""Typed stub of ``fastrag._core``, fastrag's native core (Rust, PyO3).

Every function that does real work releases the GIL. Bad argument values raise
``ValueError``; I/O failures ``OSError``; unusable index files :class:`IndexFormatError`.
The keyword defaults are the core's own, exported as the ``DEFAULT_*`` constants below (they
are written once, in the Rust source).
"""

import os
from collections.abc import Sequence
from typing import Final, final

__all__ = [
    "DEFAULT_B",
    "DEFAULT_K1",
    "DEFAULT_MIN_LEN",
    "DEFAULT_PARTS",
    "DEFAULT_STEM",
    "DEFAULT_STOPWORDS",
    "Bm25Index",
    "IndexFormatError",
    "__version__",
    "bytes_to_chars",
    "chars_to_bytes",
    "grep_texts",
    "line_starts",
    "tokenize",
    "tokenize_batch",
    "validate_spans",
]

__version__: str

#: BM25 term-frequency saturation ``k1`` of :meth:`Bm25Index.build`.
DEFAULT_K1: Final[float]
#: BM25 document-length normalisation ``b`` of :meth:`Bm25Index.build`.
DEFAULT_B: Final[float]
#: Whether English stopwords are dropped.
DEFAULT_STOPWORDS: Final[bool]
#: Shortest token kept, in characters.
DEFAULT_MIN_LEN: Final[int]
#: Whether the parts of multi-part identifiers are emitted besides the whole identifier.
DEFAULT_PARTS: Final[bool]
#: Whether alphabetic words are stemmed (Snowball English).
DEFAULT_STEM: Final[bool]

class IndexFormatError(ValueError):
    """An index file is missing parts, corrupt, or written by an incompatible version."""

def line_starts(text: str) -> list[int]:
    """Code-point offset at which every line starts (breaks: ``\\n``, ``\\r\\n``, lone ``\\r``)."""

def bytes_to_chars(text: str, byte_offsets: Sequence[int]) -> list[int]:
    """UTF-8 byte offsets of ``text`` converted to ``str`` offsets."""

def chars_to_bytes(text: str, char_offsets: Sequence[int]) -> list[int]:
    """``str`` offsets of ``text`` converted to UTF-8 byte offsets."""

def validate_spans(length: int, spans: Sequence[tuple[int, int]], max_chunk_size: int) -> None:
    """Raise ``ValueError`` unless every ``(first, last)`` lies in ``[0, length]`` and holds
    1..=``max_chunk_size`` characters."""

def tokenize(text: str, stopwords: bool = ..., min_len: int = ..., parts: bool = ..., stem: bool = ...) -> list[str]:
    """Lowercased tokens of ``text``: every identifier whole and, if it has several parts
    (``_``, camelCase, letter/digit boundaries), each part; short tokens and stopwords dropped;
    alphabetic words stemmed (Snowball English) when ``stem``."""

def tokenize_batch(
    texts: Sequence[str], stopwords: bool = ..., min_len: int = ..., parts: bool = ..., stem: bool = ...
) -> list[list[str]]:
    """:func:`tokenize` of every text, across threads."""

def grep_texts(
    texts: Sequence[str],
    pattern: str,
    literal: bool = False,
    ignore_case: bool = False,
    max_matches: int = 1000,
    max_line_chars: int = 300,
) -> tuple[list[tuple[int, int, str]], int, int]:
    """Lines of the file texts ``texts`` matching ``pattern`` (a regex of the Rust ``regex`` crate, or a
    literal text), as ripgrep's ``rg -n`` reports them: ``(matches, total, files_matched)``, the first
    ``max_matches`` as ``(position in texts, 1-based line, text cut at max_line_chars characters)``.
    ``ValueError`` (one line) for an invalid pattern."""

@final
class Bm25Index:
    """An immutable BM25 index; document ids are positions in the list it was built from."""

    @staticmethod
    def build(
        docs: Sequence[str],
        k1: float = ...,
        b: float = ...,
        stopwords: bool = ...,
        min_len: int = ...,
        parts: bool = ...,
        stem: bool = ...,
    ) -> Bm25Index:
        """Tokenize ``docs`` across threads and build the index."""

    @staticmethod
    def merge(shards: Sequence[Bm25Index]) -> Bm25Index:
        """One index over the documents of ``shards`` one after another, scored with their
        global statistics (document frequencies, count, average length): equal to :meth:`build`
        over all their documents at once. ``ValueError`` when they differ in parameters or
        tokenizer, or there are none."""

    @staticmethod
    def concat(pieces: Sequence[tuple[Bm25Index, int, int]]) -> Bm25Index:
        """One index over runs of documents, each ``(index, start, stop)`` (documents
        ``start..stop`` of ``index``), one after another, scored with the statistics of those
        documents: equal to :meth:`build` over their texts. ``ValueError`` when the indexes
        differ in parameters or tokenizer, a run lies outside its index, or there is none."""

    @staticmethod
    def load(path: str | os.PathLike[str]) -> Bm25Index:
        """Read an index written by :meth:`save` (``FileNotFoundError``, ``OSError``,
        :class:`IndexFormatError`)."""

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index atomically (to ``path + ".tmp"``, then renamed)."""

    def search(self, query: str, k: int, allowed: bytes | bytearray | None = None) -> tuple[list[int], list[float]]:
        """Top ``k`` documents with a positive score, by score desc then id asc.

        ``allowed``: one byte per document, nonzero where the document may be returned.
        """

    def search_tokens(
        self, tokens: Sequence[str], k: int, allowed: bytes | bytearray | None = None
    ) -> tuple[list[int], list[float]]:
        """:meth:`search` of a query already tokenized: ``tokens`` are looked up as they are, so
        ``search_tokens(index.tokenize(q), k) == search(q, k)``."""

    def search_batch(
        self,
        queries: Sequence[str],
        k: int,
        allowed: bytes | bytearray | None = None,
        threads: int | None = None,
    ) -> list[tuple[list[int], list[float]]]:
        """:meth:`search` of every query, in parallel (``threads``: a dedicated pool)."""

    def score_docs(self, query: str, doc_ids: Sequence[int]) -> list[float]:
        """BM25 score of each document for ``query`` (0.0 where no query term occurs)."""

    def idf(self, term: str) -> float:
        """IDF of the exact term (not tokenized); 0.0 if it is not in the vocabulary."""

    def respell(self, text: str) -> str | None:
        """``text`` with each word of four letters or more that the index holds no spelling of respelled as the
        nearest one it holds, one slip of the keys away (``None`` when no word changes)."""

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` under the index's tokenizer configuration."""

    def doc_len(self, doc_id: int) -> int:
        """Length of a document in tokens."""

    @property
    def num_docs(self) -> int: ...
    @property
    def num_terms(self) -> int: ...
    @property
    def avgdl(self) -> float: ...
    @property
    def k1(self) -> float: ...
    @property
    def b(self) -> float: ...
    @property
    def stopwords(self) -> bool: ...
    @property
    def min_len(self) -> int: ...
    @property
    def parts(self) -> bool: ...
    @property
    def stem(self) -> bool: ...
