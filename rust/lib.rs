//! PyO3 bindings of fastrag's native core, importable as `fastrag._core`.
//!
//! Bindings only: convert arguments, release the GIL around real work, map errors.

pub mod offsets;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
fn validate_spans(length: usize, spans: Vec<(usize, usize)>, max_chunk_size: usize) -> PyResult<()> {
    for (first, last) in spans {
        offsets::validate_span(first, last, length, max_chunk_size)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(line_starts, m)?)?;
    m.add_function(wrap_pyfunction!(bytes_to_chars, m)?)?;
    m.add_function(wrap_pyfunction!(chars_to_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(validate_spans, m)?)?;
    Ok(())
}
