//! Criterion benchmarks of the native core: tokenizer throughput, index build, single-query
//! latency, batches of 1000 queries at 1 and 2 threads, and index loading. Searches run both
//! ways side by side: `search` (pruned, the default) and `search_exhaustive` (every posting
//! of every query term, then a top-k pass over all documents; same results).
//!
//! Corpus: the `.py`/`.md`/`.txt` files of `data/raw/vllm-0.10.1` (relative to the crate
//! root) cut into windows of at most 2000 characters on line boundaries; without it, a
//! deterministic synthetic corpus of similar size. Queries: 1000 question-like strings built
//! from words sampled deterministically from the corpus, and the public questions of
//! `data/datasets/AnsweredQuestions` (when present).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fastrag_core::bm25::{Bm25Index, Bm25Params};
use fastrag_core::store;
use fastrag_core::tokenizer::{for_each_token, TokenizerConfig};
use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

const WINDOW: usize = 2000;
const NUM_QUERIES: usize = 1000;

/// Deterministic 64-bit LCG (Knuth's MMIX constants), enough for sampling.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Every file under `dir` with one of `exts`, sorted by path.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, exts, out);
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e))
        {
            out.push(path);
        }
    }
    out.sort();
}

/// Cuts `text` into windows of at most `WINDOW` characters, on line boundaries when possible.
fn windows(text: &str, out: &mut Vec<String>) {
    let mut current = String::new();
    let mut chars = 0;
    for line in text.split_inclusive('\n') {
        for piece in line.chars().collect::<Vec<_>>().chunks(WINDOW) {
            if chars + piece.len() > WINDOW && !current.is_empty() {
                out.push(std::mem::take(&mut current));
                chars = 0;
            }
            current.extend(piece);
            chars += piece.len();
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
}

/// ~20 M characters of code-like text with a Zipf-ish vocabulary.
fn synthetic_corpus() -> Vec<String> {
    let stems = [
        "model", "layer", "cache", "kv", "attn", "moe", "fp8", "quant", "token", "sched", "block",
        "rope", "lora", "config", "tensor", "weight", "batch", "seq", "head", "rank",
    ];
    let mut rng = Lcg(7);
    let word = |rng: &mut Lcg| {
        let a = stems[rng.below(stems.len()).min(rng.below(stems.len()))];
        match rng.below(4) {
            0 => format!("{a}_{}", stems[rng.below(stems.len())]),
            1 => format!("{a}{}", rng.below(1000)),
            _ => a.to_owned(),
        }
    };
    let mut docs = Vec::new();
    for _ in 0..10_000 {
        let mut doc = String::new();
        while doc.len() < 1900 {
            for _ in 0..8 {
                doc.push_str(&word(&mut rng));
                doc.push(' ');
            }
            doc.push('\n');
        }
        docs.push(doc);
    }
    docs
}

fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/raw/vllm-0.10.1");
    let mut paths = Vec::new();
    files(&root, &["py", "md", "txt"], &mut paths);
    if paths.is_empty() {
        eprintln!(
            "corpus: {} not found, using a synthetic corpus",
            root.display()
        );
        return synthetic_corpus();
    }
    let mut docs = Vec::new();
    for path in &paths {
        if let Ok(bytes) = std::fs::read(path) {
            windows(&String::from_utf8_lossy(&bytes), &mut docs);
        }
    }
    docs
}

/// The `"question"` strings of the public question sets (empty without them).
fn public_questions() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/datasets/AnsweredQuestions");
    let mut out = Vec::new();
    for set in ["docs", "code"] {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("dataset_{set}_public.json")))
        else {
            continue;
        };
        // the values are plain JSON strings: take them up to the next unescaped quote
        for part in text.split("\"question\": \"").skip(1) {
            let mut q = String::new();
            let mut chars = part.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => q.extend(chars.next()),
                    c => q.push(c),
                }
            }
            out.push(q);
        }
    }
    out
}

/// Question-like queries: 3 to 6 words drawn from random positions of random documents.
fn queries(docs: &[String]) -> Vec<String> {
    let starts = [
        "How does",
        "What is",
        "Where is",
        "Why does",
        "How do I configure",
    ];
    let mut rng = Lcg(42);
    (0..NUM_QUERIES)
        .map(|_| {
            let words: Vec<&str> = docs[rng.below(docs.len())]
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| w.len() > 2)
                .collect();
            let mut q = starts[rng.below(starts.len())].to_owned();
            for _ in 0..3 + rng.below(4) {
                if !words.is_empty() {
                    q.push(' ');
                    q.push_str(words[rng.below(words.len())]);
                }
            }
            q.push('?');
            q
        })
        .collect()
}

/// The BM25 index of the current generation under `data/processed`, when there is one.
fn shipped_index() -> Option<Bm25Index> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/processed");
    let current = std::fs::read_to_string(root.join("CURRENT")).ok()?;
    store::load(&root.join(current.trim()).join("bm25.bin")).ok()
}

fn pool(threads: usize) -> ThreadPool {
    ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

fn benches(c: &mut Criterion) {
    let docs = corpus();
    let bytes: usize = docs.iter().map(String::len).sum();
    let qs = queries(&docs);
    let cfg = TokenizerConfig::default();
    let (one, two) = (pool(1), pool(2));
    let index = two
        .install(|| Bm25Index::build(&docs, Bm25Params::default(), cfg))
        .expect("build");
    eprintln!(
        "corpus: {} docs, {:.1} MB, {} terms, {} postings; e.g. {:?}",
        docs.len(),
        bytes as f64 / 1e6,
        index.num_terms(),
        index.num_postings(),
        &qs[..3]
    );

    let mut g = c.benchmark_group("tokenize");
    g.warm_up_time(Duration::from_secs(1));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Bytes(bytes as u64));
    let unstemmed = TokenizerConfig { stem: false, ..cfg };
    // the stemmer's cost, side by side with the same corpus
    for (name, c) in [
        ("corpus, 1 thread", cfg),
        ("corpus, 1 thread, no stemming", unstemmed),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0usize;
                for d in &docs {
                    for_each_token(d, &c, |_| n += 1);
                }
                black_box(n)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("build");
    g.warm_up_time(Duration::from_secs(1));
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for (name, p) in [("corpus, 1 thread", &one), ("corpus, 2 threads", &two)] {
        g.bench_function(name, |b| {
            b.iter(|| p.install(|| Bm25Index::build(&docs, Bm25Params::default(), cfg)))
        });
    }
    g.finish();

    let public = public_questions();
    let mut g = c.benchmark_group("search");
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(5));
    // every query set and k, pruned and exhaustive one after the other
    let sets: [(&str, &[String]); 2] = [("sampled", &qs), ("public questions", &public)];
    for (set, queries) in sets.into_iter().filter(|(_, q)| !q.is_empty()) {
        for k in [10, 30] {
            for exhaustive in [false, true] {
                let way = if exhaustive { "exhaustive" } else { "pruned" };
                let mut i = 0;
                g.bench_function(format!("{set}, k={k}, {way}"), |b| {
                    b.iter(|| {
                        i = (i + 1) % queries.len();
                        if exhaustive {
                            black_box(index.search_exhaustive(&queries[i], k, None))
                        } else {
                            black_box(index.search(&queries[i], k, None))
                        }
                    })
                });
            }
        }
    }
    g.sample_size(20);
    for (name, p) in [("1 thread", &one), ("2 threads", &two)] {
        g.bench_function(format!("batch of 1000, k=10, {name}, pruned"), |b| {
            b.iter(|| p.install(|| index.search_batch(&qs, 10, None)))
        });
        g.bench_function(format!("batch of 1000, k=10, {name}, exhaustive"), |b| {
            b.iter(|| {
                p.install(|| {
                    qs.par_iter()
                        .map(|q| index.search_exhaustive(q, 10, None))
                        .collect::<Vec<_>>()
                })
            })
        });
    }
    g.finish();

    // the shipped index (`make index`: real chunks, bridges, stemming) with the public questions
    if let Some(shipped) = shipped_index().filter(|_| !public.is_empty()) {
        let mut g = c.benchmark_group("shipped index");
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(4));
        for exhaustive in [false, true] {
            let way = if exhaustive { "exhaustive" } else { "pruned" };
            let mut i = 0;
            g.bench_function(format!("public questions, k=10, {way}"), |b| {
                b.iter(|| {
                    i = (i + 1) % public.len();
                    if exhaustive {
                        black_box(shipped.search_exhaustive(&public[i], 10, None))
                    } else {
                        black_box(shipped.search(&public[i], 10, None))
                    }
                })
            });
        }
        g.finish();
    }

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/_work");
    std::fs::create_dir_all(&dir).expect("benches/_work");
    let path = dir.join("bm25.bin");
    store::save(&index, &path).expect("save");
    let mut g = c.benchmark_group("store");
    g.warm_up_time(Duration::from_secs(1));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.bench_function("load (2 threads)", |b| {
        b.iter(|| two.install(|| store::load(&path).expect("load")))
    });
    g.bench_function("save", |b| {
        b.iter(|| store::save(&index, &path).expect("save"))
    });
    g.finish();
}

criterion_group!(core, benches);
criterion_main!(core);
