//! Fuzzes the BM25 index loader (`store::decode`, which `store::load` shares) with arbitrary
//! bytes: it must return an error or an index, never panic, loop or allocate past the input.
//!
//! The first input byte picks how far the bytes get before the checks stop them:
//! - 0: the bytes as they are (header checks);
//! - 1: the magic bytes, then the input (version, lengths, checksum);
//! - 2: the input as a payload behind a valid header and checksum (payload structure);
//! - 3: a payload whose array sizes add up, built from small counts taken from the input and
//!   filled with its bytes (the consistency checks of vocabulary and postings).
//!
//! Whenever a file loads, re-encoding it gives back the very same bytes, and searching it
//! (with terms of its own vocabulary, with and without a mask) returns exactly the top `k` found
//! by scoring every document with `score_docs`, scores equal to the bit.
#![no_main]

use fastrag_core::check::assert_search_is_exact;
use fastrag_core::store::{decode, encode, HEADER_LEN, MAGIC, VERSION};
use libfuzzer_sys::fuzz_target;

/// Header (magic, version, length, crc32) followed by `payload`.
fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// A payload with consistent sizes: k1, b and flags from the input's first 24 bytes, small
/// counts from the next 4, then arrays cycled from the rest.
fn plausible(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 28 {
        return None;
    }
    let (fixed, rest) = data.split_at(24);
    let (counts, body) = rest.split_at(4);
    let (nd, nt, np, vb) = (
        u64::from(counts[0] % 8),
        u64::from(counts[1] % 8),
        u64::from(counts[2] % 16),
        u64::from(counts[3] % 32),
    );
    let mut p = fixed.to_vec();
    for n in [u64::from(fixed[16] % 4), nd, nt, np, vb] {
        p.extend_from_slice(&n.to_le_bytes());
    }
    let need = (vb + 4 * (2 * (nt + 1) + 2 * np + nd)) as usize;
    if body.is_empty() {
        p.resize(p.len() + need, 0);
    } else {
        p.extend(body.iter().copied().cycle().take(need));
    }
    Some(p)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        let _ = decode(data);
        return;
    };
    let bytes = match mode % 4 {
        0 => rest.to_vec(),
        1 => [&MAGIC[..], rest].concat(),
        2 => seal(rest),
        _ => match plausible(rest) {
            Some(p) => seal(&p),
            None => return,
        },
    };
    let Ok(index) = decode(&bytes) else {
        return;
    };
    assert_eq!(
        encode(&index),
        bytes,
        "a loaded index does not re-encode to its file"
    );

    let vocab = index.vocab();
    let mut queries: Vec<String> = (0..vocab.len().min(4))
        .map(|t| vocab.term(t).to_owned())
        .collect();
    queries.push(queries.join(" "));
    queries.push(String::from_utf8_lossy(rest).into_owned());
    let n = index.num_docs();
    for query in &queries {
        for k in [1, 3, n + 1] {
            assert_search_is_exact(&index, query, k);
        }
        // documents past the end score 0, they are not an error
        assert_eq!(index.score_docs(query, &[u32::MAX, n as u32]), [0.0, 0.0]);
    }
});
