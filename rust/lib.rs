//! PyO3 bindings of fastrag's native core, importable as `fastrag._core`.
//!
//! Bindings only: convert arguments, release the GIL around real work, map errors.
//! Bad argument values raise `ValueError`, I/O failures `OSError`, unusable index files
//! `IndexFormatError` (a `ValueError`). The defaults of every keyword argument are the core's
//! own ([`Bm25Params::DEFAULT`], [`TokenizerConfig::DEFAULT`]), exported as the module's
//! `DEFAULT_*` constants so that Python reads them instead of restating them.

pub mod bm25;
pub mod grep;
pub mod memory;
pub mod offsets;
pub mod store;
pub mod tokenizer;

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};

use crate::bm25::Bm25Params;
use crate::tokenizer::TokenizerConfig;

create_exception!(
    fastrag._core,
    IndexFormatError,
    PyValueError,
    "An index file is missing parts, corrupt, or written by an incompatible version."
);

/// Code-point offset at which every line of `text` starts (Python tokenizer line breaks).
#[pyfunction]
fn line_starts(py: Python<'_>, text: &str) -> Vec<usize> {
    py.detach(|| offsets::line_starts(text))
}

/// Converts UTF-8 byte offsets into `str` offsets of `text`.
#[pyfunction]
fn bytes_to_chars(py: Python<'_>, text: &str, byte_offsets: Vec<usize>) -> Vec<usize> {
    py.detach(|| offsets::bytes_to_chars(text, &byte_offsets))
}

/// Converts `str` offsets of `text` into UTF-8 byte offsets.
#[pyfunction]
fn chars_to_bytes(py: Python<'_>, text: &str, char_offsets: Vec<usize>) -> Vec<usize> {
    py.detach(|| offsets::chars_to_bytes(text, &char_offsets))
}

/// Raises `ValueError` unless every `(first, last)` span lies inside a file of `length`
/// characters and holds 1..=`max_chunk_size` of them.
#[pyfunction]
fn validate_spans(
    length: usize,
    spans: Vec<(usize, usize)>,
    max_chunk_size: usize,
) -> PyResult<()> {
    for (first, last) in spans {
        offsets::validate_span(first, last, length, max_chunk_size)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(())
}

/// Largest `threads` accepted by `search_batch`.
const MAX_THREADS: i64 = 1024;

/// A non-negative count argument, or `ValueError`.
fn non_negative(name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, got {value}")))
}

fn tokenizer_config(
    stopwords: bool,
    min_len: i64,
    parts: bool,
    stem: bool,
) -> PyResult<TokenizerConfig> {
    Ok(TokenizerConfig {
        stopwords,
        min_len: non_negative("min_len", min_len)?,
        parts,
        stem,
    })
}

/// Tokens of `text`: identifiers whole and split into parts, lowercased.
#[pyfunction]
#[pyo3(signature = (
    text,
    stopwords = TokenizerConfig::DEFAULT.stopwords,
    min_len = TokenizerConfig::DEFAULT.min_len as i64,
    parts = TokenizerConfig::DEFAULT.parts,
    stem = TokenizerConfig::DEFAULT.stem,
))]
fn tokenize(
    py: Python<'_>,
    text: &str,
    stopwords: bool,
    min_len: i64,
    parts: bool,
    stem: bool,
) -> PyResult<Vec<String>> {
    let cfg = tokenizer_config(stopwords, min_len, parts, stem)?;
    Ok(py.detach(|| tokenizer::tokenize(text, &cfg)))
}

/// [`tokenize`] of every text, on all rayon threads.
#[pyfunction]
#[pyo3(signature = (
    texts,
    stopwords = TokenizerConfig::DEFAULT.stopwords,
    min_len = TokenizerConfig::DEFAULT.min_len as i64,
    parts = TokenizerConfig::DEFAULT.parts,
    stem = TokenizerConfig::DEFAULT.stem,
))]
fn tokenize_batch(
    py: Python<'_>,
    texts: Vec<PyBackedStr>,
    stopwords: bool,
    min_len: i64,
    parts: bool,
    stem: bool,
) -> PyResult<Vec<Vec<String>>> {
    let cfg = tokenizer_config(stopwords, min_len, parts, stem)?;
    Ok(py.detach(|| tokenizer::tokenize_batch(&texts, &cfg)))
}

/// Lines of the file texts `texts` that match `pattern` (a regular expression, or a literal text), as
/// `(matches, total, files_matched)`: the first `max_matches` as `(text position, 1-based line, text
/// cut at max_line_chars)`, and the count of every matching line. `ValueError` (one line) for an
/// invalid pattern.
#[pyfunction]
#[pyo3(signature = (texts, pattern, literal = false, ignore_case = false, max_matches = 1000, max_line_chars = 300))]
fn grep_texts(
    py: Python<'_>,
    texts: Vec<PyBackedStr>,
    pattern: &str,
    literal: bool,
    ignore_case: bool,
    max_matches: usize,
    max_line_chars: usize,
) -> PyResult<GrepResult> {
    let re = grep::compile(pattern, literal, ignore_case).map_err(PyValueError::new_err)?;
    let report = py.detach(|| grep::grep_texts(&texts, &re, max_matches, max_line_chars));
    let found = report
        .matches
        .into_iter()
        .map(|m| (m.file, m.line, m.text))
        .collect();
    Ok((found, report.total, report.files_matched))
}

/// What [`grep_texts`] returns to Python.
type GrepResult = (Vec<(usize, usize, String)>, usize, usize);

/// An immutable BM25 index over a list of documents (ids are list positions).
#[pyclass(frozen, module = "fastrag._core")]
struct Bm25Index {
    inner: bm25::Bm25Index,
}

/// Checks an `allowed` mask against the index size.
fn mask(allowed: &Option<PyBackedBytes>, num_docs: usize) -> PyResult<Option<&[u8]>> {
    match allowed {
        Some(m) if m.len() != num_docs => Err(PyValueError::new_err(format!(
            "allowed must hold one byte per document ({num_docs}), got {}",
            m.len()
        ))),
        Some(m) => Ok(Some(m)),
        None => Ok(None),
    }
}

fn unzip(hits: Vec<(u32, f32)>) -> (Vec<u32>, Vec<f32>) {
    hits.into_iter().unzip()
}

#[pymethods]
impl Bm25Index {
    /// Tokenizes `docs` on all threads and builds the index.
    #[staticmethod]
    #[pyo3(signature = (
        docs,
        k1 = Bm25Params::DEFAULT.k1,
        b = Bm25Params::DEFAULT.b,
        stopwords = TokenizerConfig::DEFAULT.stopwords,
        min_len = TokenizerConfig::DEFAULT.min_len as i64,
        parts = TokenizerConfig::DEFAULT.parts,
        stem = TokenizerConfig::DEFAULT.stem,
    ))]
    #[allow(clippy::too_many_arguments)] // one per Python keyword argument
    fn build(
        py: Python<'_>,
        docs: Vec<PyBackedStr>,
        k1: f64,
        b: f64,
        stopwords: bool,
        min_len: i64,
        parts: bool,
        stem: bool,
    ) -> PyResult<Self> {
        let cfg = tokenizer_config(stopwords, min_len, parts, stem)?;
        let inner = py
            .detach(|| bm25::Bm25Index::build(&docs, Bm25Params { k1, b }, cfg))
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(Self { inner })
    }

    /// One index over the documents of `shards`, in order, scored with their global
    /// statistics: equal to `build` over all their documents at once.
    #[staticmethod]
    fn merge(py: Python<'_>, shards: Vec<PyRef<'_, Bm25Index>>) -> PyResult<Self> {
        let parts: Vec<&bm25::Bm25Index> = shards.iter().map(|s| &s.inner).collect();
        let inner = py
            .detach(|| bm25::Bm25Index::merge(&parts))
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(Self { inner })
    }

    /// One index over runs of documents, each `(index, start, stop)`: documents `start..stop`
    /// of `index`, one run after another, scored with the statistics of those documents — equal
    /// to `build` over their texts. An edit's rebuild: the old index's unchanged runs around an
    /// index of the edited documents.
    #[staticmethod]
    fn concat(py: Python<'_>, pieces: Vec<(PyRef<'_, Bm25Index>, u32, u32)>) -> PyResult<Self> {
        let parts: Vec<bm25::Piece<'_>> = pieces
            .iter()
            .map(|(index, start, stop)| bm25::Piece {
                index: &index.inner,
                docs: *start..*stop,
            })
            .collect();
        let inner = py
            .detach(|| bm25::Bm25Index::concat(&parts))
            .map_err(|e| PyValueError::new_err(e.0))?;
        Ok(Self { inner })
    }

    /// Reads an index written by `save`.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.detach(|| store::load(&path)).map_err(|e| match &e {
            store::LoadError::NotFound(_) => PyFileNotFoundError::new_err(e.to_string()),
            store::LoadError::Io(..) => PyOSError::new_err(e.to_string()),
            store::LoadError::Format(..) => IndexFormatError::new_err(e.to_string()),
        })?;
        Ok(Self { inner })
    }

    /// Writes the index to `path` atomically (via `path + ".tmp"`).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| store::save(&self.inner, &path)).map_err(|e| {
            PyOSError::new_err(format!("cannot write BM25 index {}: {e}", path.display()))
        })
    }

    /// Top `k` documents for `query`: `(doc ids, scores)`, by score desc then id asc.
    #[pyo3(signature = (query, k, allowed = None))]
    fn search(
        &self,
        py: Python<'_>,
        query: &str,
        k: i64,
        allowed: Option<PyBackedBytes>,
    ) -> PyResult<(Vec<u32>, Vec<f32>)> {
        let k = non_negative("k", k)?;
        let allowed = mask(&allowed, self.inner.num_docs())?;
        Ok(py.detach(|| unzip(self.inner.search(query, k, allowed))))
    }

    /// `search` of a query already tokenized: `tokens` are looked up as they are (the
    /// index's `tokenize` gives the tokens `search` would use).
    #[pyo3(signature = (tokens, k, allowed = None))]
    fn search_tokens(
        &self,
        py: Python<'_>,
        tokens: Vec<PyBackedStr>,
        k: i64,
        allowed: Option<PyBackedBytes>,
    ) -> PyResult<(Vec<u32>, Vec<f32>)> {
        let k = non_negative("k", k)?;
        let allowed = mask(&allowed, self.inner.num_docs())?;
        Ok(py.detach(|| unzip(self.inner.search_tokens(&tokens, k, allowed))))
    }

    /// `search` of every query in parallel; `threads` runs them on a dedicated pool.
    #[pyo3(signature = (queries, k, allowed = None, threads = None))]
    fn search_batch(
        &self,
        py: Python<'_>,
        queries: Vec<PyBackedStr>,
        k: i64,
        allowed: Option<PyBackedBytes>,
        threads: Option<i64>,
    ) -> PyResult<Vec<(Vec<u32>, Vec<f32>)>> {
        let k = non_negative("k", k)?;
        let allowed = mask(&allowed, self.inner.num_docs())?;
        let threads = match threads {
            Some(n) if !(1..=MAX_THREADS).contains(&n) => {
                let msg = format!("threads must be in 1..={MAX_THREADS}, got {n}");
                return Err(PyValueError::new_err(msg));
            }
            n => n.map(|n| n as usize),
        };
        let run = || -> Vec<(Vec<u32>, Vec<f32>)> {
            let hits = self.inner.search_batch(&queries, k, allowed);
            hits.into_iter().map(unzip).collect()
        };
        py.detach(|| match threads {
            None => Ok(run()),
            Some(n) => {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build();
                pool.map(|pool| pool.install(run))
            }
        })
        .map_err(|e| PyOSError::new_err(format!("cannot start a thread pool: {e}")))
    }

    /// BM25 score of each of `doc_ids` for `query` (0.0 where no query term occurs).
    fn score_docs(&self, py: Python<'_>, query: &str, doc_ids: Vec<i64>) -> PyResult<Vec<f32>> {
        let n = self.inner.num_docs();
        let ids = doc_ids
            .iter()
            .map(|&d| match u32::try_from(d) {
                Ok(id) if (id as usize) < n => Ok(id),
                _ => Err(PyValueError::new_err(format!(
                    "doc id {d} is not in 0..{n}"
                ))),
            })
            .collect::<PyResult<Vec<u32>>>()?;
        Ok(py.detach(|| self.inner.score_docs(query, &ids)))
    }

    /// IDF of the exact term `term` (0.0 if it is not in the vocabulary).
    fn idf(&self, term: &str) -> f64 {
        self.inner.idf(term).unwrap_or(0.0)
    }

    /// `text` with each word the index holds no spelling of respelled as the nearest one it
    /// holds, one slip of the keys away (`None` when no word changes).
    fn respell(&self, py: Python<'_>, text: &str) -> Option<String> {
        py.detach(|| self.inner.respell(text))
    }

    /// Tokens of `text` under the index's tokenizer configuration.
    fn tokenize(&self, py: Python<'_>, text: &str) -> Vec<String> {
        py.detach(|| self.inner.tokenize(text))
    }

    /// Length in tokens of document `doc_id`.
    fn doc_len(&self, doc_id: i64) -> PyResult<u32> {
        usize::try_from(doc_id)
            .ok()
            .and_then(|d| self.inner.doc_len(d))
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "doc id {doc_id} is not in 0..{}",
                    self.inner.num_docs()
                ))
            })
    }

    /// Number of documents.
    #[getter]
    fn num_docs(&self) -> usize {
        self.inner.num_docs()
    }

    /// Number of distinct terms.
    #[getter]
    fn num_terms(&self) -> usize {
        self.inner.num_terms()
    }

    /// Mean document length in tokens.
    #[getter]
    fn avgdl(&self) -> f64 {
        self.inner.avgdl()
    }

    /// BM25 `k1`.
    #[getter]
    fn k1(&self) -> f64 {
        self.inner.params().k1
    }

    /// BM25 `b`.
    #[getter]
    fn b(&self) -> f64 {
        self.inner.params().b
    }

    /// Whether stopwords are dropped.
    #[getter]
    fn stopwords(&self) -> bool {
        self.inner.tokenizer().stopwords
    }

    /// Minimum token length in characters.
    #[getter]
    fn min_len(&self) -> usize {
        self.inner.tokenizer().min_len
    }

    /// Whether identifier parts are indexed.
    #[getter]
    fn parts(&self) -> bool {
        self.inner.tokenizer().parts
    }

    /// Whether alphabetic words are stemmed.
    #[getter]
    fn stem(&self) -> bool {
        self.inner.tokenizer().stem
    }

    fn __repr__(&self) -> String {
        let (p, t) = (self.inner.params(), self.inner.tokenizer());
        format!(
            "Bm25Index(num_docs={}, num_terms={}, k1={}, b={}, stopwords={}, min_len={}, parts={}, stem={})",
            self.inner.num_docs(),
            self.inner.num_terms(),
            p.k1,
            p.b,
            if t.stopwords { "True" } else { "False" },
            t.min_len,
            if t.parts { "True" } else { "False" },
            if t.stem { "True" } else { "False" },
        )
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("IndexFormatError", m.py().get_type::<IndexFormatError>())?;
    let (p, t) = (Bm25Params::DEFAULT, TokenizerConfig::DEFAULT);
    m.add("DEFAULT_K1", p.k1)?;
    m.add("DEFAULT_B", p.b)?;
    m.add("DEFAULT_STOPWORDS", t.stopwords)?;
    m.add("DEFAULT_MIN_LEN", t.min_len)?;
    m.add("DEFAULT_PARTS", t.parts)?;
    m.add("DEFAULT_STEM", t.stem)?;
    m.add_function(wrap_pyfunction!(line_starts, m)?)?;
    m.add_function(wrap_pyfunction!(bytes_to_chars, m)?)?;
    m.add_function(wrap_pyfunction!(chars_to_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(validate_spans, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_batch, m)?)?;
    m.add_function(wrap_pyfunction!(grep_texts, m)?)?;
    m.add_class::<Bm25Index>()?;
    Ok(())
}
