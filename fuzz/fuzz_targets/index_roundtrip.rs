//! Fuzzes building an index from arbitrary documents, then saving and loading it.
//!
//! Input: one parameter byte (k1, b and tokenizer flags), then documents separated by `\x1e`
//! (lossily decoded). Checks that the build succeeds, that `decode(encode(index))` is the same
//! index, and that every search (with and without a mask) returns exactly the top `k` found by
//! scoring every document with `score_docs`, scores equal to the bit — also once reloaded.
#![no_main]

use fastrag_core::bm25::{Bm25Index, Bm25Params};
use fastrag_core::check::assert_search_is_exact;
use fastrag_core::store::{decode, encode};
use fastrag_core::tokenizer::TokenizerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&p, rest)) = data.split_first() else {
        return;
    };
    let params = Bm25Params {
        k1: [0.0, 0.9, 1.2, 3.0][usize::from(p & 3)],
        b: [0.0, 0.5, 0.75, 1.0][usize::from((p >> 2) & 3)],
    };
    let cfg = TokenizerConfig {
        stopwords: p & 16 != 0,
        parts: p & 32 != 0,
        stem: p & 64 != 0,
        min_len: 1 + usize::from(p >> 7),
    };
    let text = String::from_utf8_lossy(rest);
    let docs: Vec<&str> = text.split('\x1e').collect();
    let index = Bm25Index::build(&docs, params, cfg).expect("valid parameters must build");
    assert_eq!(index.num_docs(), docs.len());

    let bytes = encode(&index);
    let loaded = decode(&bytes).expect("an encoded index must load");
    assert_eq!(loaded, index, "decode(encode(index)) differs");

    for query in docs.iter().take(3).chain([&text.as_ref()]) {
        for k in [1, 10] {
            let a = assert_search_is_exact(&index, query, k);
            let b = assert_search_is_exact(&loaded, query, k);
            assert_eq!(a, b, "the reloaded index ranks differently");
        }
    }
});
