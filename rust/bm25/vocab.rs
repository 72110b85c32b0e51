//! The vocabulary: sorted terms in one string (the on-disk form, binary-searched), the hash
//! table that looks query terms up in it, and the hasher both use.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::simd::prefetch;
use crate::memory::huge_zeroed;

/// Sorted vocabulary in one string: term `i` is `text[ends[i]..ends[i + 1]]`.
///
/// Lookups are binary searches, so loading needs no hashing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    pub(crate) text: String,
    pub(crate) ends: Vec<u32>,
}

impl Vocab {
    /// Number of terms.
    pub fn len(&self) -> usize {
        self.ends.len().saturating_sub(1)
    }

    /// Whether the vocabulary has no terms.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Term with id `id` (`id < len()`).
    pub fn term(&self, id: usize) -> &str {
        &self.text[self.ends[id] as usize..self.ends[id + 1] as usize]
    }

    /// Id of `term`, if present.
    pub fn id(&self, term: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.term(mid).cmp(term) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid as u32),
            }
        }
        None
    }
}
/// Open-addressing hash index of a [`Vocab`]: a query term costs a probe or two instead of a
/// binary search's ~17 steps through the vocabulary (most of them cache misses).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TermTable {
    /// `hash >> 32 << 32 | (term id + 1)`, or 0 for an empty slot; a power-of-two length over
    /// 1.5 times the number of terms (8 bytes a slot), probed linearly from
    /// `hash & (len - 1)`.
    pub(super) slots: Vec<u64>,
}

impl TermTable {
    pub(super) fn new(vocab: &Vocab) -> Self {
        let n = (vocab.len() + vocab.len() / 2 + 1).next_power_of_two();
        let mut slots = huge_zeroed(n, 0u64);
        for id in 0..vocab.len() {
            let hash = Self::hash(vocab.term(id));
            let mut i = hash as usize & (n - 1);
            while slots[i] != 0 {
                i = (i + 1) & (n - 1);
            }
            slots[i] = hash >> 32 << 32 | (id as u64 + 1);
        }
        Self { slots }
    }

    pub(super) fn hash(term: &str) -> u64 {
        let mut h = FxHasher::default();
        h.write(term.as_bytes());
        // FxHash's low bits are its weakest: spread the high ones over them
        let x = h.0;
        x ^ (x >> 29) ^ (x >> 43)
    }

    /// Slot where the probe for `hash` starts.
    #[inline]
    pub(super) fn home(&self, hash: u64) -> usize {
        hash as usize & (self.slots.len() - 1)
    }

    /// Appends to `ids` the id in `vocab` (the vocabulary the table was built from) of every
    /// token of `tokens` found in it, in token order. The lookups go in steps over all the
    /// tokens (first slot, then vocabulary offsets, then text), each step's memory fetched
    /// for every token before it is read, so that their cache misses overlap.
    pub(super) fn get_all(&self, vocab: &Vocab, tokens: &mut Tokens, ids: &mut Vec<u32>) {
        let n = self.slots.len();
        // the first slot of each token's probe holding its hash: a likely match
        for (t, &hash) in tokens.hashes.iter().enumerate() {
            let mut i = self.home(hash);
            let first = loop {
                let slot = self.slots[i];
                if slot == 0 {
                    break None;
                }
                if slot >> 32 == hash >> 32 {
                    break Some(i);
                }
                i = (i + 1) & (n - 1);
            };
            if let Some(i) = first {
                let id = (self.slots[i] as u32 - 1) as usize;
                prefetch(&vocab.ends, id);
                tokens.found.push((t as u32, i as u32));
            }
        }
        for &(_, i) in &tokens.found {
            let id = (self.slots[i as usize] as u32 - 1) as usize;
            prefetch(vocab.text.as_bytes(), vocab.ends[id] as usize);
        }
        for &(t, i) in &tokens.found {
            let (t, i) = (t as usize, i as usize);
            let id = self.slots[i] as u32 - 1;
            let tok = tokens.token(t);
            if vocab.term(id as usize) == tok {
                ids.push(id);
            } else {
                // another term with the same hash bits: probe on (rare)
                ids.extend(self.get_from(vocab, tok, tokens.hashes[t], (i + 1) & (n - 1)));
            }
        }
    }

    /// Id of `term` in `vocab` (the vocabulary the table was built from).
    pub(super) fn get(&self, vocab: &Vocab, term: &str) -> Option<u32> {
        let hash = Self::hash(term);
        self.get_from(vocab, term, hash, self.home(hash))
    }

    /// [`get`](Self::get) of `term` (hashing to `hash`), probing from slot `i` on.
    fn get_from(&self, vocab: &Vocab, term: &str, hash: u64, mut i: usize) -> Option<u32> {
        let n = self.slots.len();
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            let id = (slot as u32 - 1) as usize;
            if slot >> 32 == hash >> 32 && vocab.term(id) == term {
                return Some(id as u32);
            }
            i = (i + 1) & (n - 1);
        }
    }
}

/// The tokens of a query, with their hashes, while their ids are looked up (per-thread
/// buffers, kept between queries).
#[derive(Debug, Default)]
pub(super) struct Tokens {
    text: String,
    /// Token `i` is `text[ends[i]..ends[i + 1]]`.
    ends: Vec<usize>,
    hashes: Vec<u64>,
    /// `(token, slot)`: the first slot of the token's probe with its hash bits.
    found: Vec<(u32, u32)>,
}

impl Tokens {
    pub(super) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.ends.push(0);
        self.hashes.clear();
        self.found.clear();
    }

    pub(super) fn push(&mut self, token: &str, hash: u64) {
        self.text.push_str(token);
        self.ends.push(self.text.len());
        self.hashes.push(hash);
    }

    fn token(&self, i: usize) -> &str {
        &self.text[self.ends[i]..self.ends[i + 1]]
    }
}

/// FxHash (rustc's hasher): fast and good enough for interning short tokens.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

pub(super) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

impl FxHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits: move the well-mixed high bits there
        self.0.rotate_left(26)
    }
}
