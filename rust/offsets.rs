//! Offset bookkeeping between UTF-8 bytes, Python `str` indices (code points) and lines.
//!
//! Python slices strings by code point, Rust by byte. Every span fastrag reports is in code
//! points (`text[first:last]` in Python), so conversions happen here, each in one pass.

/// Code-point offset at which every line starts; line 1 starts at 0.
///
/// Line breaks are those of Python's tokenizer (and therefore of `ast` line numbers):
/// `\n`, `\r\n` and a lone `\r`. Form feeds and Unicode separators do not break lines.
pub fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let bytes = text.as_bytes();
    let mut chars = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            chars += 1;
            if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
                starts.push(chars);
            }
        } else if b & 0xC0 != 0x80 {
            chars += 1;
        }
        i += 1;
    }
    starts
}

/// Number of code points in `text`.
pub fn char_len(text: &str) -> usize {
    text.as_bytes()
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count()
}

/// Converts sorted or unsorted byte offsets into code-point offsets in one pass over `text`.
///
/// An offset inside a multi-byte character maps to that character's index; an offset past the
/// end maps to the code-point length.
pub fn bytes_to_chars(text: &str, byte_offsets: &[usize]) -> Vec<usize> {
    let table = byte_to_char_table(text);
    byte_offsets
        .iter()
        .map(|&b| table[b.min(text.len())])
        .collect()
}

/// Converts code-point offsets into byte offsets; offsets past the end map to `text.len()`.
pub fn chars_to_bytes(text: &str, char_offsets: &[usize]) -> Vec<usize> {
    let mut table: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    table.push(text.len());
    char_offsets
        .iter()
        .map(|&c| table[c.min(table.len() - 1)])
        .collect()
}

/// `table[b]` is the code-point index of the character containing byte `b`, for every byte
/// offset `0..=text.len()`.
fn byte_to_char_table(text: &str) -> Vec<usize> {
    let mut table = Vec::with_capacity(text.len() + 1);
    let mut chars = 0usize;
    for &b in text.as_bytes() {
        if b & 0xC0 != 0x80 {
            chars += 1;
        }
        // a continuation byte belongs to the character its lead byte began
        table.push(chars - 1);
    }
    table.push(chars);
    table
}

/// Why a span is not a valid chunk of its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanError {
    /// `first > last`, or the span ends past the end of the file.
    OutOfBounds {
        first: usize,
        last: usize,
        len: usize,
    },
    /// The span is empty or longer than the allowed chunk size.
    BadLength {
        first: usize,
        last: usize,
        max: usize,
    },
}

impl std::fmt::Display for SpanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfBounds { first, last, len } => {
                write!(
                    f,
                    "span [{first}, {last}) lies outside a file of {len} characters"
                )
            }
            Self::BadLength { first, last, max } => {
                write!(f, "span [{first}, {last}) must hold 1..={max} characters")
            }
        }
    }
}

/// Checks that `[first, last)` lies inside a file of `len` code points and holds
/// `1..=max_chunk_size` of them.
pub fn validate_span(
    first: usize,
    last: usize,
    len: usize,
    max_chunk_size: usize,
) -> Result<(), SpanError> {
    if first > last || last > len {
        return Err(SpanError::OutOfBounds { first, last, len });
    }
    if last == first || last - first > max_chunk_size {
        return Err(SpanError::BadLength {
            first,
            last,
            max: max_chunk_size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lines_follow_python_tokenizer() {
        assert_eq!(line_starts(""), vec![0]);
        assert_eq!(line_starts("a\nb"), vec![0, 2]);
        assert_eq!(line_starts("a\r\nb\rc\n"), vec![0, 3, 5, 7]);
        assert_eq!(line_starts("é\nü\n"), vec![0, 2, 4]);
        assert_eq!(line_starts("a\x0cb\u{2028}c"), vec![0]);
    }

    #[test]
    fn spans_are_validated() {
        assert!(validate_span(0, 10, 10, 2000).is_ok());
        assert!(validate_span(5, 5, 10, 2000).is_err());
        assert!(validate_span(0, 11, 10, 2000).is_err());
        assert!(validate_span(0, 10, 10, 9).is_err());
        assert!(validate_span(6, 5, 10, 2000).is_err());
    }

    proptest! {
        #[test]
        fn byte_char_round_trip(s in "\\PC{0,64}") {
            let boundaries: Vec<usize> = s.char_indices().map(|(b, _)| b).chain([s.len()]).collect();
            let chars = bytes_to_chars(&s, &boundaries);
            prop_assert_eq!(&chars, &(0..boundaries.len()).collect::<Vec<_>>());
            prop_assert_eq!(chars_to_bytes(&s, &chars), boundaries);
            prop_assert_eq!(char_len(&s), s.chars().count());
        }

        #[test]
        fn line_starts_point_after_breaks(s in "[a\\n\\ré\u{1F600}]{0,64}") {
            let chars: Vec<char> = s.chars().collect();
            for &start in &line_starts(&s)[1..] {
                let prev = chars[start - 1];
                prop_assert!(prev == '\n' || (prev == '\r' && chars.get(start) != Some(&'\n')));
            }
        }
    }
}
