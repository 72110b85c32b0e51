//! Fuzzes the identifier-aware tokenizer with arbitrary text and every configuration.
//!
//! Input: one configuration byte, then text (invalid UTF-8 is replaced by U+FFFD, as Python
//! never hands the core anything but valid `str`). Besides "never panics", checks:
//! - every token is non-empty, has at least `min_len` characters, holds no whitespace, no ASCII
//!   punctuation but `_`, and does not start or end with `_`;
//! - without stemming, no token is a stopword when stopwords are dropped;
//! - `for_each_token` emits exactly what `tokenize` returns (so a second pass, with the
//!   per-thread stem memo now filled, changes nothing);
//! - tokens never straddle a space: tokens(a + " " + b) == tokens(a) ++ tokens(b).
#![no_main]

use fastrag_core::tokenizer::{for_each_token, is_stopword, tokenize, TokenizerConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let cfg = TokenizerConfig {
        stopwords: flags & 1 != 0,
        parts: flags & 2 != 0,
        stem: flags & 4 != 0,
        min_len: usize::from((flags >> 3) & 3),
    };
    let text = String::from_utf8_lossy(rest);
    let tokens = tokenize(&text, &cfg);
    for t in &tokens {
        assert!(!t.is_empty(), "empty token from {text:?}");
        assert!(
            t.chars().count() >= cfg.min_len,
            "{t:?} shorter than {}",
            cfg.min_len
        );
        assert!(
            !t.chars()
                .any(|c| c.is_whitespace() || (c.is_ascii_punctuation() && c != '_')),
            "{t:?} holds a separator"
        );
        assert!(
            !t.starts_with('_') && !t.ends_with('_'),
            "{t:?} keeps an outer underscore"
        );
        if cfg.stopwords && !cfg.stem {
            assert!(!is_stopword(t), "stopword {t:?} kept");
        }
    }

    let mut streamed = Vec::new();
    for_each_token(&text, &cfg, |t| streamed.push(t.to_owned()));
    assert_eq!(streamed, tokens, "a second pass differs");

    // cut the text at a character boundary chosen by the input, join the halves with a space
    let mut cut = usize::from(flags).wrapping_mul(31) % (text.len() + 1);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let (a, b) = text.split_at(cut);
    let mut joined = tokenize(a, &cfg);
    joined.extend(tokenize(b, &cfg));
    assert_eq!(
        tokenize(&format!("{a} {b}"), &cfg),
        joined,
        "a token straddles a space"
    );
});
