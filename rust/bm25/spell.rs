//! Respelling a query: a word none of whose spellings the vocabulary holds is read as the
//! nearest word it does hold, one slip of the keys away (Damerau's four kinds of error: a
//! letter left out, one too many, two swapped, one mistyped).
//!
//! A mistyped word finds nothing in BM25 and, in an identifier, nothing among the definitions
//! either. The candidates are the words one edit from it whose every token is a term of the
//! index held by enough documents ([`MIN_DF`], fewer in a small index): the one whose rarest
//! token the most documents hold wins, a swap or a doubled letter before any other edit (few
//! words are one of those from a given word). The edits follow how people mistype: never the
//! first letter (the one least often wrong), and a letter replaced only by a neighbouring key
//! on a QWERTY keyboard or, for a vowel, by another vowel (a misspelling more than a slip). A
//! compound is respelled whole, else part by part. A space typed a letter early or late, or
//! inside a word, is put back where that is fewer slips than reading the words apart, and so is
//! a separator typed without. A stopword is the word meant only when no word of the index is. A
//! word shorter than [`MIN_LEN`] letters is left as typed (one edit from it there are too many
//! other words), and so is one longer than [`MAX_LEN`].

use super::Bm25Index;
use crate::tokenizer::{for_each_token, part_ranges};

/// The shortest word respelled, in letters.
pub const MIN_LEN: usize = 4;
/// The longest word respelled, in letters: a longer one is taken as typed (its edits would cost
/// time and memory in the square of its length).
pub const MAX_LEN: usize = 40;
/// The fewest documents that must hold each token of a respelled word ...
pub const MIN_DF: usize = 5;
/// ... or, in a small index, one in this many of its documents (at least [`MIN_DF_FLOOR`]).
pub const DOCS_PER_DF: usize = 200;
/// The fewest documents that must hold each token of a respelled word in a small index.
pub const MIN_DF_FLOOR: usize = 2;

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const VOWELS: &[u8] = b"aeiouy";
/// QWERTY rows; each is offset by about half a key from the row above.
const ROWS: [&[u8]; 3] = [b"qwertyuiop", b"asdfghjkl", b"zxcvbnm"];

/// The keys around `key` (a lowercase ASCII letter) on a QWERTY keyboard: beside it, and the
/// two touching it in the rows above and below.
fn neighbours(key: u8) -> Vec<u8> {
    let Some((r, i)) = ROWS
        .iter()
        .enumerate()
        .find_map(|(r, row)| row.iter().position(|&c| c == key).map(|i| (r, i)))
    else {
        return Vec::new();
    };
    let mut near = Vec::new();
    let mut take = |row: usize, j: Option<usize>| {
        if let Some(&c) = j.and_then(|j| ROWS[row].get(j)) {
            near.push(c);
        }
    };
    take(r, i.checked_sub(1));
    take(r, Some(i + 1));
    if r > 0 {
        take(r - 1, Some(i));
        take(r - 1, Some(i + 1));
    }
    if r < 2 {
        take(r + 1, i.checked_sub(1));
        take(r + 1, Some(i));
    }
    near
}

/// The letters a slip may have put in place of the intended `letter`: its neighbouring keys
/// and, when it is a vowel, the other vowels.
fn replacements(letter: u8) -> Vec<u8> {
    let lower = letter.to_ascii_lowercase();
    let mut out = neighbours(lower);
    if VOWELS.contains(&lower) {
        out.extend(VOWELS.iter().filter(|&&v| v != lower));
    }
    out.sort_unstable();
    out.dedup();
    if letter.is_ascii_uppercase() {
        out.iter_mut().for_each(|c| *c = c.to_ascii_uppercase());
    }
    out
}

/// Every word one edit from `word` (ASCII) that keeps its first letter, each once, in two
/// tiers: the particular slips (a letter typed twice taken out, two letters swapped back), which
/// few other words are one of from `word`, then the rest (a letter typed once too often taken
/// out, a mistyped one replaced, a left-out one put in).
fn edits(word: &[u8]) -> [Vec<Vec<u8>>; 2] {
    let splits = || (1..=word.len()).map(|i| word.split_at(i));
    let join = |head: &[u8], middle: &[u8], rest: &[u8]| [head, middle, rest].concat();
    let doubled = |(h, t): &(&[u8], &[u8])| !t.is_empty() && h.last() == t.first();
    let other = |(h, t): &(&[u8], &[u8])| !t.is_empty() && h.last() != t.first();
    let mut particular: Vec<Vec<u8>> = splits()
        .filter(doubled)
        .map(|(h, t)| join(h, &[], &t[1..]))
        .collect();
    particular.extend(
        splits()
            .filter(|(_, t)| t.len() > 1)
            .map(|(h, t)| join(h, &[t[1], t[0]], &t[2..])),
    );
    let mut rest: Vec<Vec<u8>> = splits()
        .filter(other)
        .map(|(h, t)| join(h, &[], &t[1..]))
        .collect();
    for (h, t) in splits().filter(|(_, t)| !t.is_empty()) {
        rest.extend(replacements(t[0]).iter().map(|&c| join(h, &[c], &t[1..])));
    }
    for (h, t) in splits() {
        rest.extend(LETTERS.iter().map(|&c| join(h, &[c], t)));
    }
    let mut seen = std::collections::HashSet::new();
    let mut tiers = [particular, rest];
    for tier in &mut tiers {
        tier.retain(|e| e.as_slice() != word && seen.insert(e.clone()));
    }
    tiers
}

/// Whether `b` may stand inside a word respelled as a whole.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The words of `text` that may be respelled, as byte ranges: runs of ASCII letters, digits
/// and `_` that start with a letter, not part of a longer word in other letters.
fn ascii_words(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphabetic() || (i > 0 && is_word_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let end = (i..bytes.len())
            .find(|&j| !is_word_byte(bytes[j]))
            .unwrap_or(bytes.len());
        let alone = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if alone(text[end..].chars().next()) && alone(text[..i].chars().next_back()) {
            words.push(i..end);
        }
        i = end;
    }
    words
}

/// How many documents hold the tokens of a word: its whole (the first token) and, when it splits
/// into parts, the rarest of these.
#[derive(Debug, Clone, Copy)]
struct Held {
    whole: usize,
    parts: Option<usize>,
}

impl Held {
    /// Whether every token of the word is a term of the index.
    fn all(self) -> bool {
        self.whole > 0 && self.parts.is_none_or(|p| p > 0)
    }

    /// How many documents hold the word's rarest part (its whole when it has one part), when
    /// the index holds the word whole at all.
    fn rarest(self) -> usize {
        if self.whole == 0 {
            return 0;
        }
        self.parts.unwrap_or(self.whole)
    }
}

/// How a word of a query reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Spelling {
    /// As typed: the index holds it, or it is not a word respelled at all.
    Held,
    /// As this word the index holds.
    Respelled(String),
    /// Not at all: the index holds no word one slip from it.
    Lost,
}

impl Spelling {
    /// How many slips the reading takes: none, one, or (lost) more than one.
    fn slips(&self) -> usize {
        match self {
            Spelling::Held => 0,
            Spelling::Respelled(_) => 1,
            Spelling::Lost => 2,
        }
    }
}

impl Bm25Index {
    /// The fewest documents that must hold each token of a respelled word in this index.
    fn min_df(&self) -> usize {
        (self.num_docs() / DOCS_PER_DF).clamp(MIN_DF_FLOOR, MIN_DF)
    }

    /// How many documents hold the tokens of `word`; `None` when it has none (a stopword, too
    /// short).
    fn held(&self, word: &str) -> Option<Held> {
        let mut held: Option<Held> = None;
        for_each_token(word, &self.tokenizer, |token| {
            let id = self.term_ids.get(&self.vocab, token);
            let df = id.map_or(0, |t| self.postings(t as usize).len());
            held = Some(match held {
                None => Held {
                    whole: df,
                    parts: None,
                },
                Some(h) => Held {
                    parts: Some(h.parts.map_or(df, |p| p.min(df))),
                    ..h
                },
            });
        });
        held
    }

    /// The edit of `word` whose rarest token the most documents hold, at least
    /// [`min_df`](Self::min_df) of them, with every token a term of the index, else a stopword
    /// ("wich" for "which"): of the particular slips when one qualifies, else of every edit
    /// ([`edits`]); the earlier among equals.
    fn nearest(&self, word: &str) -> Option<String> {
        edits(word.as_bytes()).into_iter().find_map(|tier| {
            let mut best: Option<(usize, Vec<u8>)> = None;
            for edit in tier {
                let edit_text = std::str::from_utf8(&edit).expect("edits of ASCII are ASCII");
                // a stopword counts as held by no document: any word the index holds comes first
                let rarest = match self.held(edit_text) {
                    None => 0,
                    Some(held) if held.rarest() >= self.min_df() => held.rarest(),
                    Some(_) => continue,
                };
                if best.as_ref().is_none_or(|(most, _)| rarest > *most) {
                    best = Some((rarest, edit));
                }
            }
            best.map(|(_, edit)| String::from_utf8(edit).expect("edits of ASCII are ASCII"))
        })
    }

    /// The nearest spelling of `word` whose every token the index holds, when `word` has a
    /// token it does not hold (see the module documentation); `None` otherwise.
    pub fn respell_word(&self, word: &str) -> Option<String> {
        match self.spelling(word) {
            Spelling::Respelled(word) => Some(word),
            Spelling::Held | Spelling::Lost => None,
        }
    }

    /// How `word` reads: held by the index (or a stopword, outside ASCII, longer than
    /// [`MAX_LEN`]), respelled, or lost (a word shorter than [`MIN_LEN`] is not respelled). A
    /// compound is respelled whole when one edit makes a name the index holds ("QueuManager"),
    /// else part by part, one edit each ("CleintResponsd"), when that leaves no part unknown.
    fn spelling(&self, word: &str) -> Spelling {
        if word.len() > MAX_LEN || !word.is_ascii() {
            return Spelling::Held;
        }
        let Some(held) = self.held(word).filter(|h| !h.all()) else {
            return Spelling::Held;
        };
        if word.len() < MIN_LEN {
            return Spelling::Lost;
        }
        // a name whose parts the index all holds is not missing a separator ("NemotronVL")
        let parts_held = held.parts.is_some_and(|p| p > 0);
        let separated = || (!parts_held).then(|| self.separated(word)).flatten();
        if let Some(whole) = self.nearest(word).or_else(separated) {
            return Spelling::Respelled(whole);
        }
        let parts = part_ranges(word);
        if parts.len() < 2 {
            return Spelling::Lost;
        }
        let mut out = String::with_capacity(word.len() + parts.len());
        let mut copied = 0;
        for part in parts {
            let text = &word[part.clone()];
            let fixed = if self.held(text).is_none_or(Held::all) {
                text.to_owned()
            } else if let Some(fixed) = (text.len() >= MIN_LEN)
                .then(|| self.nearest(text))
                .flatten()
            {
                fixed
            } else {
                return Spelling::Lost;
            };
            out.push_str(&word[copied..part.start]);
            out.push_str(&fixed);
            copied = part.end;
        }
        out.push_str(&word[copied..]);
        if out == word {
            Spelling::Lost
        } else {
            Spelling::Respelled(out)
        }
    }

    /// `word` with a separator it was typed without put back: a space between a stopword and a
    /// word the index holds ("andexception", "string_viewfor"), else `_` in one or two places
    /// where the index holds the name so spelt ("flathashmap": `flat_hash_map`).
    fn separated(&self, word: &str) -> Option<String> {
        let cuts = || (2..word.len().saturating_sub(1)).filter(|&i| word.is_char_boundary(i));
        let stopword = |piece: &str| self.held(piece).is_none();
        let fits = |piece: &str| {
            self.held(piece)
                .is_some_and(|h| h.all() && h.rarest() >= self.min_df())
        };
        for i in cuts() {
            let (a, b) = word.split_at(i);
            if (stopword(a) && fits(b)) || (fits(a) && stopword(b)) {
                return Some(format!("{a} {b}"));
            }
        }
        let named = |name: &str| {
            self.held(name)
                .is_some_and(Held::all)
                .then(|| name.to_owned())
        };
        let apart = |i: usize| !word[..i].ends_with('_') && !word[i..].starts_with('_');
        let one = |i: usize| format!("{}_{}", &word[..i], &word[i..]);
        cuts()
            .filter(|&i| apart(i))
            .find_map(|i| named(&one(i)))
            .or_else(|| {
                cuts().filter(|&i| apart(i)).find_map(|i| {
                    cuts().filter(|&j| j > i + 1 && apart(j)).find_map(|j| {
                        named(&format!("{}_{}_{}", &word[..i], &word[i..j], &word[j..]))
                    })
                })
            })
    }

    /// `text` with its slips undone: each word of `MIN_LEN` letters or more that the index does
    /// not hold respelled ([`respell_word`](Self::respell_word)), and a space typed a letter
    /// early or late, or inside a word, put back (`respace`) where the two words would otherwise
    /// take more than one slip; `None` when nothing changes.
    pub fn respell(&self, text: &str) -> Option<String> {
        let words = ascii_words(text);
        // each distinct word read once: a long query may repeat one
        let mut read: std::collections::HashMap<&str, Spelling> = std::collections::HashMap::new();
        let spelt: Vec<Spelling> = words
            .iter()
            .map(|w| {
                let word = &text[w.clone()];
                read.entry(word)
                    .or_insert_with(|| self.spelling(word))
                    .clone()
            })
            .collect();
        let mut out = String::new();
        let (mut copied, mut i) = (0, 0);
        while i < words.len() {
            let word = words[i].clone();
            // a slipped space is one slip: the likelier reading when the two words as typed need more
            let next = words
                .get(i + 1)
                .filter(|next| &text[word.end..next.start] == " ")
                .filter(|_| spelt[i].slips() + spelt[i + 1].slips() > 1);
            let pair = next.and_then(|next| self.respace(&text[word.clone()], &text[next.clone()]));
            let (fixed, end) = match (pair, next, &spelt[i]) {
                (Some(pair), Some(next), _) => (Some(pair), next.end),
                (_, _, Spelling::Respelled(fixed)) => (Some(fixed.clone()), word.end),
                _ => (None, word.end),
            };
            if let Some(fixed) = fixed {
                out.push_str(&text[copied..word.start]);
                out.push_str(&fixed);
                copied = end;
                i += usize::from(end != word.end);
            }
            i += 1;
        }
        (copied > 0).then(|| out + &text[copied..])
    }

    /// Two words of a query typed with the space a letter early or late ("andc ontents") or
    /// between the halves of one word ("over riding"), retyped so that every word is known,
    /// when one of them is not; `None` otherwise.
    fn respace(&self, first: &str, second: &str) -> Option<String> {
        let unknown = |word: &str| self.held(word).is_some_and(|h| !h.all());
        if !unknown(first) && !unknown(second) {
            return None;
        }
        // a stopword has no token: it fits as it is
        let fits = |word: &str| {
            word.len() >= 2
                && self
                    .held(word)
                    .is_none_or(|h| h.all() && h.rarest() >= self.min_df())
        };
        let split_first = first.len() - 1;
        let moved = [
            (first.len() > 1).then(|| {
                (
                    first[..split_first].to_owned(),
                    [&first[split_first..], second].concat(),
                )
            }),
            (second.len() > 1).then(|| ([first, &second[..1]].concat(), second[1..].to_owned())),
        ];
        for (a, b) in moved.into_iter().flatten() {
            let searched = self.held(&a).is_some() || self.held(&b).is_some();
            if searched && fits(&a) && fits(&b) {
                return Some(format!("{a} {b}"));
            }
        }
        let joined = [first, second].concat();
        let held = self.held(&joined)?;
        (held.all() && held.rarest() >= self.min_df()).then_some(joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bm25::Bm25Params;
    use crate::tokenizer::TokenizerConfig;

    fn index(docs: &[&str]) -> Bm25Index {
        Bm25Index::build(docs, Bm25Params::default(), TokenizerConfig::default()).unwrap()
    }

    fn corpus() -> Bm25Index {
        let mut docs = vec!["the StateManager tracks worker state"; 6];
        docs.extend(["validates the schema and changes it"; 6]);
        docs.extend(["the client reads the response"; 6]);
        docs.extend(["the QueueManager holds a queue of jobs"; 6]);
        docs.extend(["a rare manger"; 1]);
        docs.extend(["a flat_hash_map of jobs"; 2]);
        index(&docs)
    }

    #[test]
    fn a_long_word_is_taken_as_typed() {
        let idx = corpus();
        let long = "x".repeat(4000);
        assert_eq!(
            idx.respell(&format!("chnages {long} {long}")).as_deref(),
            Some(format!("changes {long} {long}").as_str())
        );
        assert_eq!(idx.respell_word(&"chnages".repeat(6)), None);
    }

    #[test]
    fn neighbours_are_the_touching_keys() {
        assert_eq!(neighbours(b'g'), b"fhtyvb".to_vec());
        assert_eq!(neighbours(b'q'), b"wa".to_vec());
        assert_eq!(neighbours(b'm'), b"njk".to_vec());
        assert!(neighbours(b'1').is_empty());
    }

    #[test]
    fn slips_are_corrected() {
        let idx = corpus();
        assert_eq!(idx.respell_word("chnages").as_deref(), Some("changes"));
        assert_eq!(idx.respell_word("valdates").as_deref(), Some("validates"));
        assert_eq!(
            idx.respell_word("StaetManager").as_deref(),
            Some("StateManager")
        );
        assert_eq!(idx.respell_word("wroker").as_deref(), Some("worker"));
        assert_eq!(idx.respell_word("stae").as_deref(), Some("state"));
    }

    #[test]
    fn compounds_are_respelled_whole_or_by_parts() {
        let idx = corpus();
        // its parts are known ("queu" is the stem of both), its whole is not
        assert_eq!(
            idx.respell_word("QueuManager").as_deref(),
            Some("QueueManager")
        );
        // a slip in each part
        assert_eq!(
            idx.respell_word("CleintResponsd").as_deref(),
            Some("ClientResponse")
        );
        assert_eq!(
            idx.respell_word("cleint_responsd").as_deref(),
            Some("client_response")
        );
        // known parts of a name the index never saw whole stay; so does a part with no near word
        assert_eq!(idx.respell_word("ClientState"), None);
        assert_eq!(idx.respell_word("CleintXyzzyq"), None);
    }

    #[test]
    fn known_short_and_far_words_stay() {
        let idx = corpus();
        // held (even by one document: "manger"), too short, nothing near, or a first letter away
        for word in ["changes", "state", "sta", "Manger", "xhanges", "qqqqqqq"] {
            assert_eq!(idx.respell_word(word), None, "{word}");
        }
        // a replaced letter must be a neighbouring key: 'x' is not near 'h'
        assert_eq!(idx.respell_word("cxanges"), None);
    }

    #[test]
    fn respell_replaces_only_unknown_words() {
        let idx = corpus();
        assert_eq!(
            idx.respell("how the StaetManager valdates chnages?")
                .as_deref(),
            Some("how the StateManager validates changes?")
        );
        assert_eq!(idx.respell("how the StateManager validates changes"), None);
        // inside a longer word with letters outside ASCII, or empty
        assert_eq!(idx.respell("chnagesé"), None);
        assert_eq!(idx.respell(""), None);
        assert_eq!(idx.respell("état chnages").as_deref(), Some("état changes"));
    }

    #[test]
    fn a_slipped_space_is_put_back() {
        let idx = corpus();
        // a letter early, a letter late, inside a word; a stopword fits as it is
        assert_eq!(
            idx.respell("the clientr eads").as_deref(),
            Some("the client reads")
        );
        assert_eq!(
            idx.respell("the schem aand changes").as_deref(),
            Some("the schema and changes")
        );
        assert_eq!(
            idx.respell("how it valid ates").as_deref(),
            Some("how it validates")
        );
        // known words stay apart, and a word respelled on its own is not moved across a space
        assert_eq!(idx.respell("client state"), None);
        assert_eq!(
            idx.respell("the schem achanges").as_deref(),
            Some("the schema changes")
        );
    }

    #[test]
    fn a_stopword_is_the_likeliest_word_meant() {
        let idx = corpus();
        assert_eq!(idx.respell("wich state").as_deref(), Some("which state"));
        assert_eq!(
            idx.respell("reads ford the client").as_deref(),
            Some("reads for the client")
        );
        // a separator typed without
        assert_eq!(
            idx.respell("clientand state").as_deref(),
            Some("client and state")
        );
        assert_eq!(
            idx.respell("a flathashmap").as_deref(),
            Some("a flat_hash_map")
        );
        assert_eq!(
            idx.respell("clientreads"),
            None,
            "two words the index holds are not a slip"
        );
        // but a word the index holds comes first
        assert_eq!(idx.respell("the stats").as_deref(), Some("the state"));
    }
}
