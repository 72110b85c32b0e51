//! Identifier-aware tokenizer shared by documents and queries.
//!
//! The text is cut into maximal runs of Unicode alphanumerics and `_`. Every run yields its
//! whole identifier (lowercased, leading/trailing `_` stripped) and, when it has more than one
//! part, each part: runs split on `_`, on camelCase boundaries (`getHTTPResponse` → `get`,
//! `http`, `response`) and on letter/digit boundaries (`qwen3` → `qwen`, `3`).
//!
//! One refinement keeps common mixed-case acronyms whole: a part made of one capital and one
//! lowercase letter that is directly followed by an all-capital part is joined with it, so
//! `FusedMoE` → `fused`, `moe`; `RoPE` → `rope`; `LoRAConfig` → `lora`, `config` (plain
//! camelCase would give `mo`, `e`, `ro`, `pe`, ...).
//!
//! Tokens shorter than [`TokenizerConfig::min_len`] characters and (optionally) English
//! stopwords are dropped, whether they came as a whole word or as a part.
//!
//! With [`TokenizerConfig::stem`], purely alphabetic ASCII tokens (words, identifier parts and
//! lowercased camelCase identifiers; never identifiers with `_` or digits) are reduced by the
//! Snowball English (Porter2) stemmer, so that a question's "supported architectures" meets a
//! page's "supports" and "architecture". Documents and queries share the rule, so a stem never
//! has to be a word.

#![warn(missing_docs)]

use std::cell::RefCell;
use std::collections::HashMap;

use rayon::prelude::*;

/// How text is turned into tokens. Queries must use the configuration of the index they search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenizerConfig {
    /// Drop English stopwords (see [`is_stopword`]).
    pub stopwords: bool,
    /// Drop tokens shorter than this many characters (code points).
    pub min_len: usize,
    /// Emit the parts of multi-part identifiers besides the whole identifier.
    pub parts: bool,
    /// Stem alphabetic words with the Snowball English stemmer.
    pub stem: bool,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl TokenizerConfig {
    /// fastrag's defaults, exported to Python as `fastrag._core.DEFAULT_STOPWORDS`,
    /// `DEFAULT_MIN_LEN`, `DEFAULT_PARTS` and `DEFAULT_STEM`.
    pub const DEFAULT: Self = Self {
        stopwords: true,
        min_len: 2,
        parts: true,
        stem: true,
    };
}

/// English function words dropped when [`TokenizerConfig::stopwords`] is set; sorted, lowercase.
///
/// Words with a meaning in code (`self`, `none`, `return`, `all`, `any`, `up`, `down`, `out`,
/// `re`, ...) are deliberately absent.
#[rustfmt::skip]
pub const STOPWORDS: &[&str] = &[
    "about", "above", "across", "after", "again", "against", "also", "although", "am", "among",
    "an", "and", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below",
    "besides", "between", "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn",
    "do", "does", "doesn", "doing", "don", "during", "each", "either", "every", "few", "for",
    "from", "further", "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here",
    "hers", "herself", "him", "himself", "his", "how", "however", "if", "in", "into", "is", "isn",
    "it", "its", "itself", "just", "ll", "many", "me", "might", "more", "most", "much", "must",
    "my", "myself", "neither", "no", "nor", "not", "of", "on", "once", "only", "onto", "or",
    "other", "ought", "our", "ours", "ourselves", "own", "same", "shall", "she", "should",
    "shouldn", "since", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "therefore", "these", "they", "this", "those", "though",
    "through", "thus", "to", "too", "toward", "towards", "until", "upon", "us", "ve", "very", "was",
    "wasn", "we", "were", "weren", "what", "whatever", "when", "whenever", "where", "whereas",
    "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within", "without",
    "won", "would", "wouldn", "yet", "you", "your", "yours", "yourself", "yourselves",
];

/// Length in bytes of the longest stopword; longer tokens skip the lookup.
const MAX_STOPWORD_LEN: usize = 10;

/// Slots of [`STOP_TABLE`], a power of two about three times the number of stopwords.
const STOP_SLOTS: usize = 512;

/// [`STOPWORDS`] as an open-addressing hash table of [`stop_key`]s built at compile time;
/// 0 marks an empty slot. A lookup is a few integer compares, no `memcmp`.
const STOP_TABLE: [u128; STOP_SLOTS] = {
    let mut table = [0u128; STOP_SLOTS];
    let mut i = 0;
    while i < STOPWORDS.len() {
        let key = stop_key(STOPWORDS[i].as_bytes());
        let mut slot = stop_slot(key);
        while table[slot] != 0 {
            slot = (slot + 1) % STOP_SLOTS;
        }
        table[slot] = key;
        i += 1;
    }
    table
};

/// A word of at most 15 bytes packed little-endian, with its length in the top byte.
const fn stop_key(word: &[u8]) -> u128 {
    let mut key = (word.len() as u128) << 120;
    let mut i = 0;
    while i < word.len() {
        key |= (word[i] as u128) << (8 * i);
        i += 1;
    }
    key
}

const fn stop_slot(key: u128) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - STOP_SLOTS.trailing_zeros())) as usize
}

/// Whether `token` (already lowercased) is one of [`STOPWORDS`].
pub fn is_stopword(token: &str) -> bool {
    if token.len() > MAX_STOPWORD_LEN {
        return false;
    }
    let key = stop_key(token.as_bytes());
    let mut slot = stop_slot(key);
    loop {
        match STOP_TABLE[slot] {
            0 => return false,
            k if k == key => return true,
            _ => slot = (slot + 1) % STOP_SLOTS,
        }
    }
}

/// Character classes that decide where an identifier splits into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Underscore,
    Upper,
    Lower,
    Digit,
    /// Letters without case (CJK, ...).
    Caseless,
}

fn classify(c: char) -> Class {
    if c.is_ascii() {
        match c {
            '_' => Class::Underscore,
            'A'..='Z' => Class::Upper,
            'a'..='z' => Class::Lower,
            '0'..='9' => Class::Digit,
            _ => Class::Caseless,
        }
    } else if c.is_numeric() {
        Class::Digit
    } else if c.is_uppercase() {
        Class::Upper
    } else if c.is_lowercase() {
        Class::Lower
    } else {
        Class::Caseless
    }
}

/// Bit flags of the kinds of bytes in a run (see [`KIND`]).
const LOWER: u8 = 1;
const DIGIT: u8 = 2;
const UPPER: u8 = 4;
const OTHER: u8 = 8;
const UNDERSCORE: u8 = 16;

/// `KIND[b]`: kind flag of byte `b` inside a run (any non-ASCII byte is [`OTHER`]).
const KIND: [u8; 256] = {
    let mut table = [OTHER; 256];
    let mut b = 0;
    while b < 128 {
        table[b] = match b as u8 {
            b'a'..=b'z' => LOWER,
            b'0'..=b'9' => DIGIT,
            b'A'..=b'Z' => UPPER,
            b'_' => UNDERSCORE,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// `ASCII_CLASS[b]`: [`Class`] of ASCII identifier byte `b`.
const ASCII_CLASS: [Class; 128] = {
    let mut table = [Class::Caseless; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = match b as u8 {
            b'_' => Class::Underscore,
            b'A'..=b'Z' => Class::Upper,
            b'a'..=b'z' => Class::Lower,
            b'0'..=b'9' => Class::Digit,
            _ => Class::Caseless,
        };
        b += 1;
    }
    table
};

/// The next identifier run at or after byte `pos` (a character boundary): its byte range
/// and the [`KIND`] flags of its bytes.
fn next_run(text: &str, mut pos: usize) -> Option<(usize, usize, u8)> {
    let bytes = text.as_bytes();
    let char_at = |pos: usize| text[pos..].chars().next().unwrap_or(' ');
    loop {
        match KIND[*bytes.get(pos)? as usize] {
            0 => pos += 1,
            OTHER if !char_at(pos).is_alphanumeric() => pos += char_at(pos).len_utf8(),
            _ => break,
        }
    }
    let (start, mut kinds) = (pos, 0);
    while let Some(&b) = bytes.get(pos) {
        let kind = KIND[b as usize];
        match kind {
            0 => break,
            OTHER if !char_at(pos).is_alphanumeric() => break,
            OTHER => pos += char_at(pos).len_utf8(),
            _ => pos += 1,
        }
        kinds |= kind;
    }
    Some((start, pos, kinds))
}

/// Reusable buffers of one tokenizing thread.
#[derive(Debug, Default)]
struct Scratch {
    /// Lowercased token.
    lower: String,
    /// Byte offset and class of every character of the identifier.
    classes: Vec<(usize, Class)>,
    /// Parts as ranges of indices into `classes`.
    parts: Vec<(usize, usize)>,
}

/// Calls `emit` for every token of `text`, in text order.
///
/// The `&str` handed to `emit` borrows `text` or a reused buffer: copy it if you keep it.
/// This is the allocation-free core used by [`tokenize`] and by the index builder, which
/// interns tokens to term ids directly.
pub fn for_each_token(text: &str, cfg: &TokenizerConfig, mut emit: impl FnMut(&str)) {
    let mut scratch = Scratch::default();
    let mut pos = 0;
    while let Some((start, end, kinds)) = next_run(text, pos) {
        run_tokens(&text[start..end], kinds, cfg, &mut scratch, &mut emit);
        pos = end;
    }
}

/// Emits the tokens of one identifier run (original case) whose bytes have `kinds`.
fn run_tokens(
    run: &str,
    kinds: u8,
    cfg: &TokenizerConfig,
    scratch: &mut Scratch,
    emit: &mut impl FnMut(&str),
) {
    let ident = run.trim_matches('_');
    // fast path: lowercase letters alone or digits alone are one part, already lowercase
    if kinds == LOWER || kinds == DIGIT {
        keep_and_emit(ident, ident.len(), cfg, emit);
        return;
    }
    if ident.is_empty() {
        return;
    }
    emit_lowered(ident, cfg, &mut scratch.lower, emit);
    if !cfg.parts {
        return;
    }
    let Scratch {
        lower,
        classes,
        parts,
    } = scratch;
    split_parts(ident, classes, parts);
    if parts.len() > 1 {
        for &(s, e) in parts.iter() {
            let end = classes.get(e).map_or(ident.len(), |c| c.0);
            emit_lowered(&ident[classes[s].0..end], cfg, lower, emit);
        }
    }
}

/// Emits `word` lowercased (via `buf` when it has capitals).
fn emit_lowered(word: &str, cfg: &TokenizerConfig, buf: &mut String, emit: &mut impl FnMut(&str)) {
    if !word.is_ascii() {
        buf.clear();
        buf.extend(word.chars().flat_map(char::to_lowercase));
        keep_and_emit(buf, buf.chars().count(), cfg, emit);
    } else if word.bytes().any(|b| b.is_ascii_uppercase()) {
        buf.clear();
        buf.push_str(word);
        buf.make_ascii_lowercase();
        keep_and_emit(buf, buf.len(), cfg, emit);
    } else {
        keep_and_emit(word, word.len(), cfg, emit);
    }
}

/// Emits lowercase `token` of `chars` characters unless it is too short or a stopword;
/// alphabetic words are stemmed when the configuration asks for it.
fn keep_and_emit(token: &str, chars: usize, cfg: &TokenizerConfig, emit: &mut impl FnMut(&str)) {
    if chars < cfg.min_len || (cfg.stopwords && is_stopword(token)) {
        return;
    }
    if cfg.stem && token.len() > MIN_STEM_LEN && token.bytes().all(|b| b.is_ascii_lowercase()) {
        STEMS.with_borrow_mut(|stems| {
            let stem = stems.get(token);
            emit(if stem.len() >= cfg.min_len {
                stem
            } else {
                token
            });
        });
    } else {
        emit(token);
    }
}

/// Words of at most this many letters are never stemmed.
const MIN_STEM_LEN: usize = 3;

/// A per-thread memo of the Snowball stemmer: a corpus has a few ten thousand distinct words
/// but millions of occurrences, and a hash lookup costs a fraction of a stemming.
struct StemCache {
    stemmer: rust_stemmers::Stemmer,
    memo: HashMap<Box<str>, Box<str>>,
}

/// Entries after which the memo starts afresh (bounds memory in long-lived processes).
const STEM_CACHE_LIMIT: usize = 1 << 20;

impl StemCache {
    /// The stem of `word`, computed once per thread.
    fn get(&mut self, word: &str) -> &str {
        if !self.memo.contains_key(word) {
            if self.memo.len() >= STEM_CACHE_LIMIT {
                self.memo.clear();
            }
            let stem: Box<str> = self.stemmer.stem(word).into();
            self.memo.insert(word.into(), stem);
        }
        &self.memo[word]
    }
}

thread_local! {
    static STEMS: RefCell<StemCache> = RefCell::new(StemCache {
        stemmer: rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English),
        memo: HashMap::new(),
    });
}

/// Fills `parts` with the parts of `ident` (no leading/trailing `_`) as ranges of indices
/// into `classes`, which receives the byte offset and class of every character.
fn split_parts(ident: &str, classes: &mut Vec<(usize, Class)>, parts: &mut Vec<(usize, usize)>) {
    classes.clear();
    if ident.is_ascii() {
        classes.extend(
            ident
                .bytes()
                .enumerate()
                .map(|(i, b)| (i, ASCII_CLASS[b as usize & 0x7f])),
        );
    } else {
        classes.extend(ident.char_indices().map(|(i, c)| (i, classify(c))));
    }
    parts.clear();
    let mut start = None;
    for (j, &(_, class)) in classes.iter().enumerate() {
        let prev = if j == 0 {
            Class::Underscore
        } else {
            classes[j - 1].1
        };
        let boundary = match (prev, class) {
            (_, Class::Underscore) => {
                parts.extend(start.take().map(|s| (s, j)));
                continue;
            }
            (Class::Underscore, _) => true,
            (Class::Digit, Class::Digit) => false,
            (Class::Digit, _) | (_, Class::Digit) => true,
            (Class::Lower | Class::Caseless, Class::Upper) => true,
            // `HTTPResponse`: the last capital of a run starts the next word.
            (Class::Upper, Class::Upper) => classes.get(j + 1).is_some_and(|c| c.1 == Class::Lower),
            _ => false,
        };
        if boundary {
            parts.extend(start.replace(j).map(|s| (s, j)));
        }
    }
    parts.extend(start.map(|s| (s, classes.len())));
    join_acronyms(classes, parts);
}

/// Joins a `Xy` part with a directly following all-capital part (`Mo`+`E`, `Lo`+`RA`).
fn join_acronyms(classes: &[(usize, Class)], parts: &mut Vec<(usize, usize)>) {
    let mut i = 0;
    while i + 1 < parts.len() {
        let ((s, e), (ns, ne)) = (parts[i], parts[i + 1]);
        let cap_low =
            e - s == 2 && classes[s].1 == Class::Upper && classes[s + 1].1 == Class::Lower;
        if cap_low && ns == e && classes[ns..ne].iter().all(|c| c.1 == Class::Upper) {
            parts[i].1 = ne;
            parts.remove(i + 1);
        }
        i += 1;
    }
}

/// Byte ranges of the parts of the identifier `ident` (`StateManager`: `State`, `Manager`), as
/// the tokenizer splits it; one range when it has one part.
pub fn part_ranges(ident: &str) -> Vec<std::ops::Range<usize>> {
    let (mut classes, mut parts) = (Vec::new(), Vec::new());
    split_parts(ident, &mut classes, &mut parts);
    let at = |i: usize| classes.get(i).map_or(ident.len(), |c: &(usize, Class)| c.0);
    parts.iter().map(|&(s, e)| at(s)..at(e)).collect()
}

/// Tokens of `text`, in text order.
pub fn tokenize(text: &str, cfg: &TokenizerConfig) -> Vec<String> {
    let mut tokens = Vec::new();
    for_each_token(text, cfg, |t| tokens.push(t.to_owned()));
    tokens
}

/// [`tokenize`] of every text, spread over rayon's current thread pool.
pub fn tokenize_batch<S: AsRef<str> + Sync>(
    texts: &[S],
    cfg: &TokenizerConfig,
) -> Vec<Vec<String>> {
    texts
        .par_iter()
        .map(|t| tokenize(t.as_ref(), cfg))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The default configuration without stemming, so that splitting rules read plainly.
    fn toks(text: &str) -> Vec<String> {
        let cfg = TokenizerConfig {
            stem: false,
            ..TokenizerConfig::default()
        };
        tokenize(text, &cfg)
    }

    fn all(text: &str) -> Vec<String> {
        let cfg = TokenizerConfig {
            stopwords: false,
            min_len: 1,
            parts: true,
            stem: false,
        };
        tokenize(text, &cfg)
    }

    #[test]
    fn stems_words_and_parts_but_not_whole_identifiers() {
        let cfg = TokenizerConfig::default();
        assert_eq!(
            tokenize("supported architectures", &cfg),
            ["support", "architectur"]
        );
        assert_eq!(
            tokenize("Supports the architecture", &cfg),
            ["support", "architectur"]
        );
        assert_eq!(
            tokenize("load_lora_adapters", &cfg),
            ["load_lora_adapters", "load", "lora", "adapt"]
        );
        // short words, digits and mixed tokens are left alone
        assert_eq!(
            tokenize("gpus fp8 uses", &cfg),
            ["gpus", "fp8", "fp", "use"]
        );
    }

    #[test]
    fn splits_identifiers_into_parts() {
        assert_eq!(
            toks("getHTTPResponse"),
            ["gethttpresponse", "get", "http", "response"]
        );
        assert_eq!(toks("FusedMoE"), ["fusedmoe", "fused", "moe"]);
        assert_eq!(toks("fp8"), ["fp8", "fp"]);
        assert_eq!(all("fp8"), ["fp8", "fp", "8"]);
        assert_eq!(all("qwen3"), ["qwen3", "qwen", "3"]);
        assert_eq!(
            toks("fused_moe_kernel"),
            ["fused_moe_kernel", "fused", "moe", "kernel"]
        );
        assert_eq!(toks("__init__"), ["init"]);
        assert_eq!(toks("_private_var"), ["private_var", "private", "var"]);
        assert_eq!(
            toks("RoPE LoRAConfig"),
            ["rope", "loraconfig", "lora", "config"]
        );
        assert_eq!(
            toks("PyTorch OpenAI"),
            ["pytorch", "py", "torch", "openai", "open", "ai"]
        );
        assert_eq!(all("getX"), ["getx", "get", "x"]);
        assert_eq!(toks("KVCache"), ["kvcache", "kv", "cache"]);
        assert_eq!(
            toks("Qwen2VLForConditionalGeneration"),
            [
                "qwen2vlforconditionalgeneration",
                "qwen",
                "vl",
                "conditional",
                "generation"
            ]
        );
        assert_eq!(all("a__b"), ["a__b", "a", "b"]);
        assert_eq!(toks("___ _"), Vec::<String>::new());
    }

    #[test]
    fn separators_and_unicode() {
        assert_eq!(
            toks("self.model(x)  # déjà-vu"),
            ["self", "model", "déjà", "vu"]
        );
        assert_eq!(
            toks("ÉCOLE ÜberNetz"),
            ["école", "übernetz", "über", "netz"]
        );
        assert_eq!(toks("日本語テキスト"), ["日本語テキスト"]);
        assert_eq!(toks("x²"), ["x²"]);
        assert_eq!(toks(""), Vec::<String>::new());
    }

    #[test]
    fn stopwords_and_min_len() {
        assert_eq!(
            toks("What is the KV cache of vLLM?"),
            ["kv", "cache", "vllm", "llm"]
        );
        // a stopword is dropped as a part too, never as part of a whole identifier
        assert_eq!(toks("is_available"), ["is_available", "available"]);
        assert_eq!(
            toks("def return None class import self"),
            ["def", "return", "none", "class", "import", "self"]
        );
        let keep = TokenizerConfig {
            stopwords: false,
            min_len: 2,
            parts: false,
            stem: false,
        };
        assert_eq!(
            tokenize("What is fused_moe?", &keep),
            ["what", "is", "fused_moe"]
        );
        let long = TokenizerConfig {
            min_len: 4,
            stem: false,
            ..TokenizerConfig::default()
        };
        assert_eq!(tokenize("vllm kv déjà", &long), ["vllm", "déjà"]);
    }

    #[test]
    fn stopword_list_is_sorted_and_sized() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(
            (140..=170).contains(&STOPWORDS.len()),
            "{}",
            STOPWORDS.len()
        );
        assert!(STOPWORDS.iter().all(|w| w.len() <= MAX_STOPWORD_LEN));
        assert!(STOPWORDS.iter().all(|w| is_stopword(w)));
        assert_eq!(
            STOP_TABLE.iter().filter(|&&k| k != 0).count(),
            STOPWORDS.len()
        );
        for near in [
            "",
            "th",
            "thee",
            "the\0",
            "them_",
            "yourselves1",
            "Ing",
            "doe",
        ] {
            assert!(!is_stopword(near), "{near:?}");
        }
        for code in [
            "self", "return", "none", "def", "class", "import", "all", "any", "re",
        ] {
            assert!(!is_stopword(code), "{code}");
        }
    }

    #[test]
    fn batch_matches_single() {
        let texts = ["getHTTPResponse", "", "what is RoPE", "ÜberNetz_v2"];
        let cfg = TokenizerConfig::default();
        let batch = tokenize_batch(&texts, &cfg);
        for (t, b) in texts.iter().zip(&batch) {
            assert_eq!(&tokenize(t, &cfg), b);
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_unicode(s in "\\PC*", min_len in 0usize..4, stop: bool, parts: bool) {
            let cfg = TokenizerConfig { stopwords: stop, min_len, parts, stem: true };
            for t in tokenize(&s, &cfg) {
                prop_assert!(!t.is_empty());
                prop_assert!(t.chars().count() >= min_len);
            }
        }

        #[test]
        fn never_panics_on_any_chars(s in any::<Vec<char>>()) {
            let s: String = s.into_iter().collect();
            let _ = tokenize(&s, &TokenizerConfig::default());
        }

        #[test]
        fn ascii_tokens_are_lowercase_words(s in "[A-Za-z0-9_ .:()-]{0,80}") {
            for t in all(&s) {
                prop_assert!(t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
                prop_assert!(!t.starts_with('_') && !t.ends_with('_'));
            }
        }
    }
}
