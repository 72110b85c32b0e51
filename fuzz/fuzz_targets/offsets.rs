//! Fuzzes the byte/code-point/line offset conversions against naive reference versions.
//!
//! Input: a little-endian `u16` text length, that many bytes of text (lossily decoded), then
//! 8-byte little-endian offsets (any `usize`, past-the-end and huge ones included). Checks:
//! - `char_len` and `line_starts` equal the naive counts over `chars()` (Python's line breaks:
//!   `\n`, `\r\n`, lone `\r`);
//! - `bytes_to_chars` / `chars_to_bytes` equal the naive maps, and round-trip;
//! - `validate_span` accepts exactly the spans the rule describes, for any values.
#![no_main]

use fastrag_core::offsets::{bytes_to_chars, char_len, chars_to_bytes, line_starts, validate_span};
use libfuzzer_sys::fuzz_target;

/// Code-point index of the character holding byte `b`; the length for `b` past the end.
fn naive_byte_to_char(text: &str, b: usize) -> usize {
    if b >= text.len() {
        return text.chars().count();
    }
    text.char_indices().filter(|&(i, _)| i <= b).count() - 1
}

/// Byte offset of code point `c`; the byte length for `c` past the end.
fn naive_char_to_byte(text: &str, c: usize) -> usize {
    text.char_indices().nth(c).map_or(text.len(), |(i, _)| i)
}

fn naive_line_starts(text: &str) -> Vec<usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut starts = vec![0];
    for (i, &c) in chars.iter().enumerate() {
        if c == '\n' || (c == '\r' && chars.get(i + 1) != Some(&'\n')) {
            starts.push(i + 1);
        }
    }
    starts
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let text = String::from_utf8_lossy(&data[2..2 + n]);
    let raw: Vec<usize> = data[2 + n..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    // half the offsets folded into range so most of them land inside the text
    let offsets: Vec<usize> = raw
        .iter()
        .enumerate()
        .map(|(i, &o)| if i % 2 == 0 { o % (text.len() + 2) } else { o })
        .collect();

    let len = char_len(&text);
    assert_eq!(len, text.chars().count());
    assert_eq!(line_starts(&text), naive_line_starts(&text));

    let chars = bytes_to_chars(&text, &offsets);
    let expected: Vec<usize> = offsets
        .iter()
        .map(|&b| naive_byte_to_char(&text, b))
        .collect();
    assert_eq!(chars, expected, "bytes_to_chars of {offsets:?} in {text:?}");

    let bytes = chars_to_bytes(&text, &offsets);
    let expected: Vec<usize> = offsets
        .iter()
        .map(|&c| naive_char_to_byte(&text, c))
        .collect();
    assert_eq!(bytes, expected, "chars_to_bytes of {offsets:?} in {text:?}");
    for (&c, &b) in offsets.iter().zip(&bytes) {
        assert!(text.is_char_boundary(b));
        assert_eq!(
            bytes_to_chars(&text, &[b]),
            [c.min(len)],
            "round trip of {c}"
        );
    }

    for w in raw.windows(3) {
        let (first, last, max) = (w[0], w[1], w[2]);
        let ok = first <= last && last <= len && last > first && last - first <= max;
        assert_eq!(
            validate_span(first, last, len, max).is_ok(),
            ok,
            "span [{first}, {last}) max {max}"
        );
    }
});
