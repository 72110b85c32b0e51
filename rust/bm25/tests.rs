use proptest::prelude::*;

use super::prune::WIDTH;
use super::simd::{add_row, add_row_portable};
use super::topk::by_rank;
use super::*;

/// Textbook BM25 straight from the token lists, written out here rather than calling the
/// implementation's own helpers: Lucene's idf `ln(1 + (N − df + 0.5) / (df + 0.5))`.
fn naive_scores(docs: &[String], query: &str, p: Bm25Params, cfg: &TokenizerConfig) -> Vec<f64> {
    let toks: Vec<Vec<String>> = docs.iter().map(|d| tokenize(d, cfg)).collect();
    let n = docs.len();
    let avgdl = toks.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1) as f64;
    let mut q = tokenize(query, cfg);
    q.sort();
    q.dedup();
    toks.iter()
        .map(|d| {
            q.iter()
                .map(|term| {
                    let tf = d.iter().filter(|t| *t == term).count() as f64;
                    let df = toks.iter().filter(|d| d.contains(term)).count();
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let (n, df) = (n as f64, df as f64);
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    let norm = p.k1 * (1.0 - p.b + p.b * d.len() as f64 / avgdl);
                    idf * tf * (p.k1 + 1.0) / (tf + norm)
                })
                .sum()
        })
        .collect()
}

fn corpus() -> Vec<String> {
    [
        "def fused_moe(x): return FusedMoE(x)",
        "The KV cache stores keys and values",
        "class KVCache: pass  # cache of keys",
        "rope rope RoPE scaling for long context",
        "",
        "What is vLLM? vLLM is a fast inference engine",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn builds_and_searches() {
    let idx =
        Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
    assert_eq!(idx.num_docs(), 6);
    assert_eq!(idx.doc_len(4), Some(0));
    assert_eq!(idx.doc_len(6), None);
    let hits = idx.search("kv cache", 10, None);
    let mut found: Vec<u32> = hits.iter().map(|h| h.0).collect();
    found.sort();
    assert_eq!(found, [1, 2]);
    assert!(hits[0].1 >= hits[1].1);
    assert_eq!(idx.search("kv cache", 1, None).len(), 1);
    assert_eq!(idx.search("kv cache", usize::MAX, None), hits);
    assert!(idx.search("kv cache", 0, None).is_empty());
    assert!(idx.search("", 10, None).is_empty());
    assert!(idx.search("asdfghjkl", 10, None).is_empty());
    assert_eq!(
        idx.search("kv cache", 10, Some(&[1, 1, 0, 1, 1, 1])).len(),
        1
    );
    assert!(idx.search("kv cache", 10, Some(&[1])).is_empty());
    // "moe" is in one document of six: ln(1 + (6 − 1 + 0.5) / (1 + 0.5))
    assert_eq!(idx.idf("moe"), Some((1.0f64 + 5.5 / 1.5).ln()));
    assert_eq!(idx.idf("Moe"), None);
    let ids = [hits[0].0, hits[1].0, 0, 99];
    assert_eq!(
        idx.score_docs("kv cache", &ids),
        [hits[0].1, hits[1].1, 0.0, 0.0]
    );
    let batch = idx.search_batch(&["kv cache", "fused moe", ""], 3, None);
    assert_eq!(batch[0], hits);
    assert_eq!(batch[1], idx.search("fused moe", 3, None));
}

#[test]
fn thread_local_scratch_serves_indexes_of_any_size() {
    let big: Vec<String> = (0..500)
        .map(|i| format!("doc{i} common word{}", i % 7))
        .collect();
    let big = Bm25Index::build(&big, Bm25Params::default(), TokenizerConfig::default()).unwrap();
    let small =
        Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
    let expected = small.search("kv cache", 10, None);
    assert_eq!(big.search("common word3", 1000, None).len(), 500);
    assert_eq!(small.search("kv cache", 10, None), expected);
    assert_eq!(big.search("doc499", 3, None)[0].0, 499);
}

#[test]
fn build_is_the_same_on_any_number_of_threads() {
    // 64 documents at least per block: 2,000 make one group of blocks on one thread and
    // up to 8 groups, scattering their postings at once, on 8 threads
    let docs: Vec<String> = (0..2000)
        .map(|i| {
            format!(
                "doc{} load_{}_adapter cache{} {} shared text {i}",
                i % 97,
                i % 13,
                i % 5,
                "rope ".repeat(i % 7)
            )
        })
        .collect();
    let build = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| Bm25Index::build(&docs, Bm25Params::default(), TokenizerConfig::default()))
            .unwrap()
    };
    let one = build(1);
    assert_eq!(one.num_docs(), docs.len());
    for threads in [2, 3, 8] {
        assert_eq!(build(threads), one, "{threads} threads");
    }
}

#[test]
fn empty_index() {
    let idx =
        Bm25Index::build::<&str>(&[], Bm25Params::default(), TokenizerConfig::default()).unwrap();
    assert_eq!((idx.num_docs(), idx.num_terms(), idx.avgdl()), (0, 0, 0.0));
    assert!(idx.search("anything", 5, None).is_empty());
}

#[test]
fn rejects_bad_params() {
    for (k1, b) in [
        (-1.0, 0.5),
        (f64::NAN, 0.5),
        (1.2, 1.5),
        (1.2, f64::INFINITY),
        (1e7, 0.5),
    ] {
        assert!(
            Bm25Index::build(&corpus(), Bm25Params { k1, b }, TokenizerConfig::default()).is_err()
        );
    }
}

#[test]
fn add_row_paths_agree() {
    let row: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 256) as u8).collect();
    let start: Vec<f32> = (0..1000u32).map(|i| i as f32 * 0.37).collect();
    for step in [0.0, 1e-30, 0.013, 3.7, 1e36] {
        for add in [false, true] {
            let mut want = start.clone();
            add_row_portable(&mut want, &row, step, add);
            let mut got = start.clone();
            // the dispatched path (AVX-512 or AVX2 where the CPU has them)
            add_row(&mut got, &row, step, add);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want));
            for (i, (&w, &s)) in want.iter().zip(&start).enumerate() {
                let x = f32::from(row[i]) * step;
                assert_eq!(w.to_bits(), if add { s + x } else { x }.to_bits());
            }
        }
    }
}

#[test]
fn batched_lookup_probes_past_a_hash_match() {
    let idx =
        Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
    let (vocab, table) = (&idx.vocab, &idx.term_ids);
    let n = table.slots.len();
    // a table where the first slot holding the hash bits of a term is another term's
    let (a, b) = (vocab.term(1), vocab.term(2));
    let (id_a, id_b) = (1u32, 2u32);
    let hash = TermTable::hash(a);
    let mut slots = vec![0u64; n];
    let home = hash as usize & (n - 1);
    slots[home] = hash >> 32 << 32 | u64::from(id_b + 1);
    slots[(home + 1) & (n - 1)] = hash >> 32 << 32 | u64::from(id_a + 1);
    let forged = TermTable { slots };
    let mut tokens = Tokens::default();
    tokens.clear();
    for tok in [a, b, a] {
        tokens.push(tok, TermTable::hash(tok));
    }
    let mut ids = Vec::new();
    forged.get_all(vocab, &mut tokens, &mut ids);
    // `b` is absent from the forged table, unless it probes into the forged slots
    let found_b = forged.get(vocab, b);
    let want: Vec<u32> = [Some(id_a), found_b, Some(id_a)]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(ids, want);
    assert_eq!(forged.get(vocab, a), Some(id_a));
    // the real table agrees with one lookup at a time on every token of the corpus
    let mut found = 0;
    for doc in corpus()
        .iter()
        .chain(&["kv caches, unknown words: zzzz".to_string()])
    {
        let mut one_by_one: Vec<u32> = Vec::new();
        for_each_token(doc, &idx.tokenizer, |t| {
            one_by_one.extend(table.get(vocab, t))
        });
        one_by_one.sort_unstable();
        one_by_one.dedup();
        assert_eq!(idx.query_terms(doc), one_by_one);
        found += one_by_one.len();
    }
    assert!(found > 10);
}

#[test]
fn vocab_lookup() {
    let idx =
        Bm25Index::build(&corpus(), Bm25Params::default(), TokenizerConfig::default()).unwrap();
    for i in 0..idx.num_terms() {
        assert_eq!(idx.vocab().id(idx.vocab().term(i)), Some(i as u32));
        assert_eq!(
            idx.term_ids.get(&idx.vocab, idx.vocab().term(i)),
            Some(i as u32)
        );
    }
    assert_eq!(idx.vocab().id("zzzz"), None);
    for missing in ["zzzz", "", "cach", "caches"] {
        assert_eq!(
            idx.term_ids.get(&idx.vocab, missing),
            idx.vocab().id(missing)
        );
    }
}

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "alpha", "beta", "gamma", "fp8", "getValue", "the", "x_y", "Ω", "dé",
    ])
    .prop_map(String::from)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn matches_naive_bm25(
        docs in prop::collection::vec(prop::collection::vec(word(), 0..12).prop_map(|w| w.join(" ")), 1..20),
        query in prop::collection::vec(word(), 0..5).prop_map(|w| w.join(" ")),
        k1 in 0.0f64..3.0,
        b in 0.0f64..=1.0,
        mask_seed: u64,
    ) {
        let p = Bm25Params { k1, b };
        let cfg = TokenizerConfig::default();
        let idx = Bm25Index::build(&docs, p, cfg).unwrap();
        let naive = naive_scores(&docs, &query, p, &cfg);
        let hits = idx.search(&query, docs.len(), None);
        prop_assert_eq!(hits.len(), naive.iter().filter(|&&s| s > 0.0).count());
        for w in hits.windows(2) {
            prop_assert!(by_rank(&w[0], &w[1]).is_lt());
        }
        for &(doc, score) in &hits {
            let want = naive[doc as usize];
            prop_assert!((f64::from(score) - want).abs() <= 1e-5 * want.max(1.0), "{} vs {}", score, want);
        }
        let all: Vec<u32> = (0..docs.len() as u32).collect();
        for (doc, s) in idx.score_docs(&query, &all).into_iter().enumerate() {
            prop_assert!((f64::from(s) - naive[doc]).abs() <= 1e-5 * naive[doc].max(1.0));
        }
        // top-k is a prefix of the full ranking
        for k in 0..=hits.len() {
            prop_assert_eq!(&idx.search(&query, k, None)[..], &hits[..k]);
        }
        // the mask removes exactly the masked documents
        let mask: Vec<u8> = (0..docs.len()).map(|i| ((mask_seed >> (i % 64)) & 1) as u8).collect();
        let masked: Vec<_> = hits.iter().copied().filter(|h| mask[h.0 as usize] != 0).collect();
        prop_assert_eq!(idx.search(&query, docs.len(), Some(&mask)), masked);
    }
}

impl Bm25Index {
    /// The index with pruning rows for the terms in at least `min_df` documents.
    fn with_range_rows(mut self, min_df: usize) -> Self {
        let n = self.num_docs();
        self.ranges = RangeMax::with_rows(&self.offsets, &self.doc_ids, &self.contrib, n, min_df);
        self
    }
}

/// Hits with their scores' exact bits (so that equality is bitwise).
fn bits(v: &[(u32, f32)]) -> Vec<(u32, u32)> {
    v.iter().map(|&(d, s)| (d, s.to_bits())).collect()
}

/// Pruned search of `terms` without the exhaustive fallback, with several numbers of
/// ranges scored one by one, and the default search, checked to agree exactly (same ids,
/// same score bits) with the exhaustive search; returns its hits.
fn check_pruned(
    idx: &Bm25Index,
    terms: &[u32],
    k: usize,
    allowed: Option<&[u8]>,
) -> Result<Vec<(u32, f32)>, TestCaseError> {
    let mut scratch = Scratch::default();
    let want = idx.search_terms_exhaustive(terms, k, allowed, &mut scratch);
    // the scratch is reused throughout, as a thread's is
    for seed in [0, 1, 3, 16, usize::MAX] {
        let pruning = Pruning {
            fallback: false,
            seed,
        };
        let got = idx.search_pruned(terms, k, allowed, &mut scratch, pruning);
        prop_assert_eq!(bits(&got), bits(&want), "seed = {}", seed);
    }
    prop_assert_eq!(
        bits(&idx.search_terms(terms, k, allowed, &mut scratch)),
        bits(&want)
    );
    Ok(want)
}

/// Words with skewed frequencies: word `i` of 40 is drawn with probability ~ 1 / (i + 1).
fn skewed_word() -> impl Strategy<Value = String> {
    (0.0f64..1.0).prop_map(|u| format!("w{}", (41f64.powf(u) - 1.0) as usize))
}

/// A mask of `n` documents: each allowed with probability `density / 4`, or, for density
/// [`BLOCKS`], whole ranges allowed or not (a path filter's shape: the pruned search then
/// never scores the ranges without an allowed document).
fn mask_for(n: usize, seed: u64, density: u8) -> Vec<u8> {
    if density == BLOCKS {
        return (0..n)
            .map(|i| ((seed >> ((i / WIDTH) % 64)) & 1) as u8)
            .collect();
    }
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            u8::from((x % 4) < u64::from(density))
        })
        .collect()
}

/// The density of [`mask_for`] that allows or forbids whole ranges.
const BLOCKS: u8 = 5;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Pruned search == exhaustive search on built corpora with Zipf-like words, for every
    /// range shape, k and mask.
    #[test]
    fn pruning_is_exact_on_corpora(
        docs in prop::collection::vec(prop::collection::vec(skewed_word(), 0..30).prop_map(|w| w.join(" ")), 1..120),
        copies in prop::collection::vec(0usize..1000, 0..60),
        query in prop::collection::vec(skewed_word(), 1..8).prop_map(|w| w.join(" ")),
        min_df in prop::sample::select(vec![1usize, 2, 3, 8, 40, usize::MAX]),
        k in prop::sample::select(vec![0usize, 1, 2, 3, 10, 100, 1000]),
        mask_seed: u64,
        density in 0u8..=BLOCKS,
        masked: bool,
    ) {
        // copies of documents further on tie with them: the k-th best score is often shared
        let mut docs = docs;
        docs.extend(copies.iter().map(|&i| docs[i % docs.len()].clone()).collect::<Vec<_>>());
        let cfg = TokenizerConfig { stopwords: false, ..TokenizerConfig::default() };
        let idx = Bm25Index::build(&docs, Bm25Params::default(), cfg)
            .unwrap()
            .with_range_rows(min_df);
        let terms = idx.query_terms(&query);
        let mask = mask_for(docs.len(), mask_seed, density);
        let allowed = masked.then_some(&mask[..]);
        let hits = check_pruned(&idx, &terms, k, allowed)?;
        prop_assert!(hits.len() <= k);
        let ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
        let scores: Vec<f32> = hits.iter().map(|h| h.1).collect();
        prop_assert_eq!(idx.score_docs(&query, &ids), scores);
        // the same query handed over as tokens: the same hits, bit for bit
        let tokens = idx.tokenize(&query);
        prop_assert_eq!(idx.token_terms(&tokens), terms);
        prop_assert_eq!(
            bits(&idx.search_tokens(&tokens, k, allowed)),
            bits(&idx.search(&query, k, allowed))
        );
    }

    /// The same on hand-made postings whose contributions span many magnitudes (sums
    /// round, some overflow to infinity): the range bounds must hold without slack.
    #[test]
    fn pruning_is_exact_on_extreme_contributions(
        n_docs in 1usize..300,
        lists in prop::collection::vec(
            (prop::collection::btree_set(0u32..300, 1..120),
             prop::collection::vec(prop::sample::select(vec![1e-30f32, 1e-3, 0.1, 1.0, 1.0 + f32::EPSILON, 3.0, 7.5, 1e3, 1e7, 1e30, 3e38]), 120),
             prop::collection::vec(0.5f32..1.1, 120)),
            1..12),
        query_seed: u64,
        min_df in prop::sample::select(vec![1usize, 4, 30, usize::MAX]),
        k in prop::sample::select(vec![1usize, 3, 10, 500]),
    ) {
        let mut offsets = vec![0u32];
        let (mut doc_ids, mut contrib) = (Vec::new(), Vec::new());
        for (ids, scales, jitter) in &lists {
            let ids: std::collections::BTreeSet<u32> = ids.iter().map(|&d| d % n_docs as u32).collect();
            for (i, &d) in ids.iter().enumerate() {
                doc_ids.push(d);
                contrib.push(scales[i] * jitter[i]);
            }
            offsets.push(doc_ids.len() as u32);
        }
        let words: Vec<String> = (0..lists.len()).map(|i| format!("t{i:03}")).collect();
        let mut vocab = Vocab { text: String::new(), ends: vec![0] };
        for w in &words {
            vocab.text.push_str(w);
            vocab.ends.push(vocab.text.len() as u32);
        }
        let idx = Bm25Index::from_parts(
            Bm25Params::default(), TokenizerConfig::default(), vocab, offsets, doc_ids, contrib, vec![1; n_docs],
        )
        .unwrap()
        .with_range_rows(min_df);
        let terms: Vec<u32> = (0..lists.len() as u32).filter(|t| (query_seed >> (t % 64)) & 1 == 1).collect();
        check_pruned(&idx, &terms, k, None)?;
    }
}

#[test]
fn infinite_scores_and_bounds() {
    // doc 1 scores 3e38 + 3e38 = inf: its range's bound is infinite too
    let vocab = Vocab {
        text: "ab".into(),
        ends: vec![0, 1, 2],
    };
    let idx = Bm25Index::from_parts(
        Bm25Params::default(),
        TokenizerConfig::default(),
        vocab,
        vec![0, 2, 4],
        vec![0, 1, 1, 2],
        vec![1.0, 3e38, 3e38, 2.0],
        vec![1; 3],
    )
    .unwrap();
    for min_df in [1, 3] {
        let idx = idx.clone().with_range_rows(min_df);
        for k in [1, 2, 3] {
            let hits = check_pruned(&idx, &[0, 1], k, None).unwrap();
            assert_eq!(hits[0], (1, f32::INFINITY));
            assert_eq!(hits.len(), k);
        }
    }
}

#[test]
fn default_ranges_and_fallback() {
    // many documents sharing the query terms: the pruned path gives up and scans
    let docs: Vec<String> = (0..5000)
        .map(|i| format!("common shared w{} w{}", i % 13, i % 101))
        .collect();
    let idx = Bm25Index::build(&docs, Bm25Params::default(), TokenizerConfig::default()).unwrap();
    assert_eq!(idx.ranges.n_ranges, 5000usize.div_ceil(WIDTH));
    for query in ["common shared", "w7 w77 common", "w100", "nothing here"] {
        for k in [1, 10, 5000] {
            let terms = idx.query_terms(query);
            let mut scratch = Scratch::default();
            assert_eq!(
                idx.search(query, k, None),
                idx.search_terms_exhaustive(&terms, k, None, &mut scratch)
            );
            assert_eq!(
                idx.search_pruned(
                    &terms,
                    k,
                    None,
                    &mut scratch,
                    Pruning {
                        fallback: false,
                        ..Pruning::DEFAULT
                    }
                ),
                idx.search_exhaustive(query, k, None)
            );
        }
    }
}

#[test]
fn ranges_without_an_allowed_document_get_a_zero_bound() {
    // 4 ranges; the third holds no allowed document, the fourth has a zero bound already
    let mut scratch = Scratch {
        bounds: vec![2.0, 5.0, 9.0, 0.0],
        ..Scratch::default()
    };
    let mut mask = vec![0u8; 4 * WIDTH];
    mask[3] = 1; // range 0
    mask[2 * WIDTH - 1] = 1; // range 1, its last document
    mask[3 * WIDTH] = 1; // range 3
    assert_eq!(Bm25Index::mask_bounds(&mask, &mut scratch), 5.0);
    assert_eq!(scratch.bounds, vec![2.0, 5.0, 0.0, 0.0]);
    // a mask shorter than the index forbids the documents past its end
    scratch.bounds = vec![2.0, 5.0, 9.0, 1.0];
    assert_eq!(Bm25Index::mask_bounds(&mask[..WIDTH], &mut scratch), 2.0);
    assert_eq!(scratch.bounds, vec![2.0, 0.0, 0.0, 0.0]);
}

fn merged(docs: &[String], cuts: &[usize], p: Bm25Params, cfg: TokenizerConfig) -> Bm25Index {
    let mut bounds: Vec<usize> = cuts.iter().map(|&c| c % (docs.len() + 1)).collect();
    bounds.extend([0, docs.len()]);
    bounds.sort_unstable();
    let shards: Vec<Bm25Index> = bounds
        .windows(2)
        .map(|w| Bm25Index::build(&docs[w[0]..w[1]], p, cfg).unwrap())
        .collect();
    Bm25Index::merge(&shards.iter().collect::<Vec<_>>()).unwrap()
}

#[test]
fn merge_rejects_mixed_or_no_shards() {
    let docs = corpus();
    let a = Bm25Index::build(&docs, Bm25Params::DEFAULT, TokenizerConfig::DEFAULT).unwrap();
    let b = Bm25Index::build(
        &docs,
        Bm25Params { k1: 0.9, b: 0.4 },
        TokenizerConfig::DEFAULT,
    )
    .unwrap();
    assert!(Bm25Index::merge(&[&a, &b]).is_err());
    assert!(Bm25Index::merge(&[]).is_err());
    assert_eq!(Bm25Index::merge(&[&a]).unwrap(), a);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Merging shards gives the index built over all their documents, array for array
    /// (so every search and score agrees to the bit), whatever the cut and parameters.
    #[test]
    fn merge_equals_one_build(
        docs in prop::collection::vec(
            prop::collection::vec(skewed_word(), 0..60).prop_map(|w| w.join(" ")), 1..40),
        cuts in prop::collection::vec(0usize..64, 0..5),
        k1 in prop::sample::select(vec![0.0, 0.5, 1.2, 3.0]),
        b in prop::sample::select(vec![0.0, 0.3, 0.75, 1.0]),
    ) {
        let p = Bm25Params { k1, b };
        let whole = Bm25Index::build(&docs, p, TokenizerConfig::DEFAULT).unwrap();
        prop_assert_eq!(merged(&docs, &cuts, p, TokenizerConfig::DEFAULT), whole);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An edit's rebuild: documents `start..stop` of an index replaced by others, as the old
    /// index's runs around an index of the new documents, equals the index built over the
    /// edited list, array for array (terms only the removed documents held are gone).
    #[test]
    fn concat_of_runs_equals_one_build(
        docs in prop::collection::vec(
            prop::collection::vec(skewed_word(), 0..60).prop_map(|w| w.join(" ")), 1..40),
        fresh in prop::collection::vec(
            prop::collection::vec(skewed_word(), 0..60).prop_map(|w| w.join(" ")), 0..6),
        cut in (0usize..64, 0usize..64),
        k1 in prop::sample::select(vec![0.0, 0.5, 1.2, 3.0]),
        b in prop::sample::select(vec![0.0, 0.3, 0.75, 1.0]),
    ) {
        let p = Bm25Params { k1, b };
        let (lo, hi) = (cut.0 % (docs.len() + 1), cut.1 % (docs.len() + 1));
        let (start, stop) = (lo.min(hi), lo.max(hi));
        let mut edited: Vec<String> = docs[..start].to_vec();
        edited.extend(fresh.iter().cloned());
        edited.extend(docs[stop..].iter().cloned());
        prop_assume!(!edited.is_empty());
        let old = Bm25Index::build(&docs, p, TokenizerConfig::DEFAULT).unwrap();
        let new = Bm25Index::build(&fresh, p, TokenizerConfig::DEFAULT).unwrap();
        let pieces = [
            Piece { index: &old, docs: 0..start as u32 },
            Piece::whole(&new),
            Piece { index: &old, docs: stop as u32..docs.len() as u32 },
        ];
        let whole = Bm25Index::build(&edited, p, TokenizerConfig::DEFAULT).unwrap();
        prop_assert_eq!(Bm25Index::concat(&pieces).unwrap(), whole);
    }
}

#[test]
fn concat_rejects_runs_outside_their_index() {
    let docs = corpus();
    let a = Bm25Index::build(&docs, Bm25Params::DEFAULT, TokenizerConfig::DEFAULT).unwrap();
    let n = docs.len() as u32;
    assert!(Bm25Index::concat(&[Piece {
        index: &a,
        docs: 0..n + 1
    }])
    .is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = Piece {
        index: &a,
        docs: 3..1,
    };
    assert!(Bm25Index::concat(&[backwards]).is_err());
    assert!(Bm25Index::concat(&[]).is_err());
    let halves = [
        Piece {
            index: &a,
            docs: 0..2,
        },
        Piece {
            index: &a,
            docs: 2..n,
        },
    ];
    assert_eq!(Bm25Index::concat(&halves).unwrap(), a);
}

#[test]
fn merge_recovers_large_term_frequencies() {
    let mut docs = corpus();
    docs.push("cache ".repeat(5000));
    docs.push(format!("{} keys", "values ".repeat(900)));
    let whole = Bm25Index::build(&docs, Bm25Params::DEFAULT, TokenizerConfig::DEFAULT).unwrap();
    assert_eq!(
        merged(
            &docs,
            &[2, 5],
            Bm25Params::DEFAULT,
            TokenizerConfig::DEFAULT
        ),
        whole
    );
}
