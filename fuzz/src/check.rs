//! Oracles shared by the fuzz targets (not part of the core).

use crate::bm25::Bm25Index;

/// The top `k` of `query` computed the slow, obvious way: [`Bm25Index::score_docs`] of every
/// document, positive scores of allowed documents only, by score desc then doc id asc.
pub fn expected_top_k(
    index: &Bm25Index,
    query: &str,
    k: usize,
    allowed: Option<&[u8]>,
) -> Vec<(u32, f32)> {
    let n = u32::try_from(index.num_docs()).expect("fewer than 2^32 documents");
    let ids: Vec<u32> = (0..n).collect();
    let mut hits: Vec<(u32, f32)> = ids
        .iter()
        .copied()
        .zip(index.score_docs(query, &ids))
        .filter(|&(d, s)| {
            s > 0.0 && allowed.is_none_or(|m| m.get(d as usize).is_some_and(|&b| b != 0))
        })
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    hits.truncate(k);
    hits
}

/// Checks that `search` returns exactly [`expected_top_k`], scores equal to the bit, with and
/// without a mask (every other document allowed), and returns the unmasked hits.
pub fn assert_search_is_exact(index: &Bm25Index, query: &str, k: usize) -> Vec<(u32, f32)> {
    let bits = |hits: &[(u32, f32)]| {
        hits.iter()
            .map(|&(d, s)| (d, s.to_bits()))
            .collect::<Vec<_>>()
    };
    let hits = index.search(query, k, None);
    let expected = expected_top_k(index, query, k, None);
    assert_eq!(
        bits(&hits),
        bits(&expected),
        "search({query:?}, {k}) differs from scoring every document"
    );
    let mask: Vec<u8> = (0..index.num_docs()).map(|d| (d % 2) as u8).collect();
    let masked = index.search(query, k, Some(&mask));
    let expected = expected_top_k(index, query, k, Some(&mask));
    assert_eq!(
        bits(&masked),
        bits(&expected),
        "masked search({query:?}, {k}) differs from scoring every document"
    );
    hits
}
