//! Fuzzes building an index from arbitrary documents, then saving and loading it.
//!
//! Input: one parameter byte (k1, b and tokenizer flags), then documents separated by `\x1e`
//! (lossily decoded). Checks that the build succeeds, that `decode(encode(index))` is the same
//! index, and that every search returns known documents with positive scores in rank order,
//! each document's score being the one `score_docs` reports — also for the reloaded index.
#![no_main]

use fastrag_core::bm25::{Bm25Index, Bm25Params};
use fastrag_core::store::{decode, encode};
use fastrag_core::tokenizer::TokenizerConfig;
use libfuzzer_sys::fuzz_target;

fn check_search(index: &Bm25Index, query: &str, k: usize) -> Vec<(u32, f32)> {
    let hits = index.search(query, k, None);
    assert!(hits.len() <= k);
    for w in hits.windows(2) {
        assert!(
            w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0),
            "out of order: {hits:?}"
        );
    }
    let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
    for ((doc, score), s) in hits.iter().zip(index.score_docs(query, &ids)) {
        assert!((*doc as usize) < index.num_docs());
        assert!(*score > 0.0, "non-positive score {score} for doc {doc}");
        assert_eq!(score.to_bits(), s.to_bits());
    }
    hits
}

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
            let a = check_search(&index, query, k);
            let b = check_search(&loaded, query, k);
            assert_eq!(a, b, "the reloaded index ranks differently");
        }
    }
});
