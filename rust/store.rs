//! Versioned binary on-disk format of a [`Bm25Index`].
//!
//! ```text
//! header   magic "FRBM25\0\x01" (8) | version u32 | payload length u64 | crc32(payload) u32
//! payload  k1 f64 | b f64 | stopwords u8 | parts u8 | 6 zero bytes | min_len u64
//!          num_docs u64 | num_terms u64 | num_postings u64 | vocab_bytes u64
//!          vocabulary text [u8; vocab_bytes]        (sorted terms, concatenated UTF-8)
//!          vocabulary ends [u32; num_terms + 1]
//!          posting offsets [u32; num_terms + 1]
//!          doc ids [u32; num_postings] | contributions [f32; num_postings]
//!          doc lengths [u32; num_docs]
//! ```
//!
//! Everything is little-endian. Loading reads the arrays straight into their final buffers
//! (one copy, checksummed on the way), checks the header, the checksum and every invariant
//! the search relies on, and never panics on corrupt input.

#![warn(missing_docs)]

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::bm25::{Bm25Index, Bm25Params, Vocab};
use crate::memory::huge_zeroed;
use crate::tokenizer::TokenizerConfig;

/// First 8 bytes of every index file.
pub const MAGIC: [u8; 8] = *b"FRBM25\0\x01";
/// Format version this build writes and reads.
pub const VERSION: u32 = 2;
/// Bytes before the payload: magic, version, payload length, checksum.
pub const HEADER_LEN: usize = 24;
/// Fixed-size fields at the start of the payload.
const FIXED_LEN: usize = 64;
const HINT: &str = "re-run `fastrag index` to rebuild it";

/// Why bytes are not a usable index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// Zero bytes.
    Empty,
    /// Shorter than the header.
    TruncatedHeader {
        /// File length.
        len: usize,
    },
    /// The payload is shorter than the header announces.
    Truncated {
        /// Announced payload length.
        expected: u64,
        /// Bytes actually present.
        found: u64,
    },
    /// Bytes follow the announced payload.
    TrailingBytes {
        /// How many.
        extra: u64,
    },
    /// The file does not start with [`MAGIC`].
    BadMagic,
    /// Written by a build with another [`VERSION`].
    Version {
        /// Version in the file.
        found: u32,
    },
    /// The payload checksum does not match.
    Checksum {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the payload as read.
        computed: u32,
    },
    /// The checksum matches but the arrays contradict each other.
    Inconsistent(String),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => write!(f, "the file is empty"),
            Self::TruncatedHeader { len } => {
                write!(f, "the file is truncated: {len} bytes, shorter than the {HEADER_LEN}-byte header")
            }
            Self::Truncated { expected, found } => write!(
                f,
                "the file is truncated: the header announces {expected} payload bytes but {found} follow"
            ),
            Self::TrailingBytes { extra } => write!(f, "{extra} unexpected bytes follow the payload"),
            Self::BadMagic => write!(f, "bad magic bytes: this is not a fastrag BM25 index file"),
            Self::Version { found } => write!(
                f,
                "index format version {found}, but this build of fastrag reads version {VERSION}"
            ),
            Self::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:08x}, computed {computed:08x}): the file is corrupt"
            ),
            Self::Inconsistent(why) => write!(f, "inconsistent contents: {why}"),
        }
    }
}

impl std::error::Error for FormatError {}

/// Why [`load`] failed.
#[derive(Debug)]
pub enum LoadError {
    /// No file at the path.
    NotFound(PathBuf),
    /// The file could not be read.
    Io(PathBuf, io::Error),
    /// The file is not a usable index.
    Format(PathBuf, FormatError),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(p) => {
                write!(
                    f,
                    "no BM25 index at {}; run `fastrag index` to build it",
                    p.display()
                )
            }
            Self::Io(p, e) => write!(f, "cannot read BM25 index {}: {e}; {HINT}", p.display()),
            Self::Format(p, e) => {
                write!(f, "{} is not a usable BM25 index: {e}; {HINT}", p.display())
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Serializes `index` (header included).
pub fn encode(index: &Bm25Index) -> Vec<u8> {
    let (vocab, tok, p) = (index.vocab(), index.tokenizer(), index.params());
    let arrays = 4
        * (vocab.ends.len() + index.offsets.len() + 2 * index.doc_ids.len() + index.doc_lens.len());
    let mut out = Vec::with_capacity(HEADER_LEN + FIXED_LEN + vocab.text.len() + arrays);
    out.resize(HEADER_LEN, 0);
    out.extend_from_slice(&p.k1.to_le_bytes());
    out.extend_from_slice(&p.b.to_le_bytes());
    out.extend_from_slice(&[
        u8::from(tok.stopwords),
        u8::from(tok.parts),
        u8::from(tok.stem),
        0,
        0,
        0,
        0,
        0,
    ]);
    for n in [
        tok.min_len,
        index.num_docs(),
        index.num_terms(),
        index.doc_ids.len(),
        vocab.text.len(),
    ] {
        out.extend_from_slice(&(n as u64).to_le_bytes());
    }
    out.extend_from_slice(vocab.text.as_bytes());
    for array in [&vocab.ends, &index.offsets, &index.doc_ids] {
        out.extend(array.iter().flat_map(|v| v.to_le_bytes()));
    }
    out.extend(index.contrib.iter().flat_map(|v| v.to_le_bytes()));
    out.extend(index.doc_lens.iter().flat_map(|v| v.to_le_bytes()));

    let payload = &out[HEADER_LEN..];
    let (len, crc) = (payload.len() as u64, crc32fast::hash(payload));
    out[..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..20].copy_from_slice(&len.to_le_bytes());
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Parses bytes written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Bm25Index, FormatError> {
    read_index(bytes, bytes.len() as u64).map_err(|e| match e {
        ReadError::Format(e) => e,
        // every length is checked against `bytes.len()` first, so reads cannot run out
        ReadError::Io(e) => FormatError::Inconsistent(e.to_string()),
    })
}

/// Why [`read_index`] failed.
#[derive(Debug)]
enum ReadError {
    Io(io::Error),
    Format(FormatError),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<FormatError> for ReadError {
    fn from(e: FormatError) -> Self {
        Self::Format(e)
    }
}

fn inconsistent(why: &str) -> ReadError {
    ReadError::Format(FormatError::Inconsistent(why.to_owned()))
}

/// Reads an index of `len` bytes from `src`: checks the header, reads the payload straight
/// into its final arrays while checksumming it, then checks the arrays' consistency.
fn read_index(mut src: impl Read, len: u64) -> Result<Bm25Index, ReadError> {
    if len == 0 {
        return Err(FormatError::Empty.into());
    }
    let mut header = [0u8; HEADER_LEN];
    let avail = len.min(HEADER_LEN as u64) as usize;
    src.read_exact(&mut header[..avail])?;
    let seen = avail.min(MAGIC.len());
    if header[..seen] != MAGIC[..seen] {
        return Err(FormatError::BadMagic.into());
    }
    if avail < HEADER_LEN {
        return Err(FormatError::TruncatedHeader { len: avail }.into());
    }
    let mut fields = Reader(&header[MAGIC.len()..]);
    let (version, expected, stored) = (fields.u32()?, fields.u64()?, fields.u32()?);
    if version != VERSION {
        return Err(FormatError::Version { found: version }.into());
    }
    let found = len - HEADER_LEN as u64;
    if found < expected {
        return Err(FormatError::Truncated { expected, found }.into());
    }
    if found > expected {
        return Err(FormatError::TrailingBytes {
            extra: found - expected,
        }
        .into());
    }
    let mut payload = Payload {
        src,
        left: expected,
        crc: crc32fast::Hasher::new(),
    };
    let index = read_payload(&mut payload);
    // corruption shows as a checksum mismatch first, whatever else it breaks
    payload.skip_rest()?;
    let computed = payload.crc.finalize();
    if computed != stored {
        return Err(FormatError::Checksum { stored, computed }.into());
    }
    index
}

/// Parses the payload (see the module documentation).
fn read_payload(p: &mut Payload<impl Read>) -> Result<Bm25Index, ReadError> {
    let fixed = p.bytes(FIXED_LEN)?;
    let mut r = Reader(&fixed);
    let params = Bm25Params {
        k1: r.f64()?,
        b: r.f64()?,
    };
    let flags = r.take(8)?;
    if flags[..3].iter().any(|&b| b > 1) || flags[3..].iter().any(|&b| b != 0) {
        return Err(inconsistent("tokenizer flags are not booleans"));
    }
    let min_len = r.usize()?;
    let tokenizer = TokenizerConfig {
        stopwords: flags[0] == 1,
        min_len,
        parts: flags[1] == 1,
        stem: flags[2] == 1,
    };
    let (num_docs, num_terms, num_postings, vocab_bytes) =
        (r.usize()?, r.usize()?, r.usize()?, r.usize()?);
    let arrays = num_terms
        .checked_add(1)
        .and_then(|t| t.checked_mul(2))
        .and_then(|n| n.checked_add(num_postings.checked_mul(2)?))
        .and_then(|n| n.checked_add(num_docs))
        .and_then(|n| n.checked_mul(4))
        .and_then(|n| n.checked_add(vocab_bytes));
    if arrays.map(|n| n as u64) != Some(p.left) {
        return Err(inconsistent(
            "array sizes do not add up to the payload length",
        ));
    }
    // sizes add up to what the file holds, so no allocation below exceeds the file size
    let text = p.bytes(vocab_bytes)?;
    let ends = p.u32s(num_terms + 1)?;
    let offsets = p.u32s(num_terms + 1)?;
    let doc_ids = p.u32s(num_postings)?;
    let contrib = p
        .u32s(num_postings)?
        .into_iter()
        .map(f32::from_bits)
        .collect();
    let doc_lens = p.u32s(num_docs)?;
    let text =
        String::from_utf8(text).map_err(|_| inconsistent("vocabulary is not valid UTF-8"))?;
    let vocab = Vocab { text, ends };
    Bm25Index::from_parts(
        params, tokenizer, vocab, offsets, doc_ids, contrib, doc_lens,
    )
    .map_err(|why| inconsistent(&why))
}

/// The payload being read: bytes left and their running checksum.
struct Payload<R> {
    src: R,
    left: u64,
    crc: crc32fast::Hasher,
}

impl<R: Read> Payload<R> {
    /// Reads the next `buf.len()` payload bytes into `buf`, checksumming them.
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.len() as u64 > self.left {
            return Err(inconsistent("payload ends inside a field"));
        }
        // chunks small enough to be checksummed while still in cache
        for chunk in buf.chunks_mut(1 << 18) {
            self.src.read_exact(chunk)?;
            self.crc.update(chunk);
        }
        self.left -= buf.len() as u64;
        Ok(())
    }

    fn bytes(&mut self, n: usize) -> Result<Vec<u8>, ReadError> {
        let mut out = vec![0u8; n];
        self.fill(&mut out)?;
        Ok(out)
    }

    /// `n` little-endian `u32`s, read straight into the returned vector (backed by huge pages
    /// where the kernel gives them: the postings are read at random by every query).
    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, ReadError> {
        let mut out = huge_zeroed(n, 0u32);
        self.fill(as_bytes_mut(&mut out))?;
        for v in &mut out {
            *v = u32::from_le(*v); // compiles to nothing on little-endian targets
        }
        Ok(out)
    }

    /// Checksums whatever payload is left unread.
    fn skip_rest(&mut self) -> Result<(), ReadError> {
        let mut buf = vec![0u8; self.left.min(1 << 18) as usize];
        while self.left > 0 {
            let n = self.left.min(buf.len() as u64) as usize;
            self.fill(&mut buf[..n])?;
        }
        Ok(())
    }
}

/// The memory of `v` as bytes, so a file can be read into it without a second copy.
fn as_bytes_mut(v: &mut [u32]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: `u32` has no padding and no invalid bit patterns and `u8` has alignment 1, so
    // the same memory may be viewed, read and written as `len` bytes; the exclusive borrow of
    // `v` lasts as long as the returned slice.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}

/// Little-endian cursor over a byte slice; running out of bytes is a format error.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        if n > self.0.len() {
            return Err(FormatError::Inconsistent(
                "payload ends inside a field".into(),
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn f64(&mut self) -> Result<f64, FormatError> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    fn usize(&mut self) -> Result<usize, FormatError> {
        usize::try_from(self.u64()?)
            .map_err(|_| FormatError::Inconsistent("a count overflows".into()))
    }
}

/// `path` with `.tmp` appended to its file name.
fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// Writes `index` to `path` atomically: to `path.tmp`, flushed to disk, then renamed.
pub fn save(index: &Bm25Index, path: &Path) -> io::Result<()> {
    let bytes = encode(index);
    let tmp = tmp_path(path);
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(&bytes)?;
        f.sync_all()
    });
    let result = written.and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads an index written by [`save`].
pub fn load(path: &Path) -> Result<Bm25Index, LoadError> {
    let io_error = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => LoadError::NotFound(path.to_owned()),
        _ => LoadError::Io(path.to_owned(), e),
    };
    let file = File::open(path).map_err(io_error)?;
    let len = file.metadata().map_err(io_error)?.len();
    read_index(file, len).map_err(|e| match e {
        ReadError::Io(e) => io_error(e),
        ReadError::Format(e) => LoadError::Format(path.to_owned(), e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index() -> Bm25Index {
        let docs = [
            "def fused_moe(x): return FusedMoE(x)",
            "KV cache",
            "",
            "RoPE scaling déjà vu 日本",
        ];
        let tok = TokenizerConfig {
            stopwords: false,
            min_len: 1,
            parts: true,
            stem: true,
        };
        Bm25Index::build(&docs, Bm25Params { k1: 1.5, b: 0.5 }, tok).unwrap()
    }

    /// Re-seals a (modified) payload with a correct header.
    fn seal(payload: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    fn inconsistent(bytes: &[u8]) -> String {
        match decode(bytes) {
            Err(FormatError::Inconsistent(why)) => why,
            other => panic!("expected an inconsistency, got {other:?}"),
        }
    }

    #[test]
    fn round_trip() {
        let idx = index();
        let decoded = decode(&encode(&idx)).unwrap();
        assert_eq!(decoded, idx);
        assert_eq!(
            decoded.search("fused moe", 3, None),
            idx.search("fused moe", 3, None)
        );
        let empty =
            Bm25Index::build::<&str>(&[], Bm25Params::default(), TokenizerConfig::default())
                .unwrap();
        assert_eq!(decode(&encode(&empty)).unwrap(), empty);
    }

    #[test]
    fn save_and_load_files() {
        let dir = std::env::temp_dir().join(format!("fastrag-store-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bm25.bin");
        save(&index(), &path).unwrap();
        assert!(!tmp_path(&path).exists());
        assert_eq!(load(&path).unwrap(), index());
        let missing = load(&dir.join("nope.bin")).unwrap_err();
        assert!(matches!(missing, LoadError::NotFound(_)));
        assert!(missing
            .to_string()
            .ends_with("run `fastrag index` to build it"));
        fs::write(&path, b"").unwrap();
        let empty = load(&path).unwrap_err();
        assert!(matches!(empty, LoadError::Format(_, FormatError::Empty)));
        assert!(empty.to_string().ends_with(HINT), "{empty}");
        assert!(matches!(load(&dir).unwrap_err(), LoadError::Io(..)));
        assert!(save(&index(), &dir.join("no/such/dir/x.bin")).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn header_errors_are_distinct() {
        let good = encode(&index());
        assert_eq!(decode(&[]).unwrap_err(), FormatError::Empty);
        assert_eq!(
            decode(&good[..10]).unwrap_err(),
            FormatError::TruncatedHeader { len: 10 }
        );
        assert_eq!(
            decode(b"PK\x03\x04 zip file here").unwrap_err(),
            FormatError::BadMagic
        );
        let mut other = good.clone();
        other[8] = 99;
        assert_eq!(
            decode(&other).unwrap_err(),
            FormatError::Version { found: 99 }
        );
        let short = &good[..good.len() - 5];
        assert!(matches!(
            decode(short).unwrap_err(),
            FormatError::Truncated { .. }
        ));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            decode(&long).unwrap_err(),
            FormatError::TrailingBytes { extra: 1 }
        );
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(
            decode(&flipped).unwrap_err(),
            FormatError::Checksum { .. }
        ));
    }

    #[test]
    fn inconsistent_payloads_are_rejected() {
        let good = encode(&index());
        let payload = &good[HEADER_LEN..];
        let idx = index();
        let (nt, np, nd, vb) = (
            idx.num_terms(),
            idx.doc_ids.len(),
            idx.num_docs(),
            idx.vocab().text.len(),
        );
        let vocab_at = FIXED_LEN;
        let ends_at = vocab_at + vb;
        let offsets_at = ends_at + 4 * (nt + 1);
        let ids_at = offsets_at + 4 * (nt + 1);
        let contrib_at = ids_at + 4 * np;
        let lens_at = contrib_at + 4 * np;
        assert_eq!(lens_at + 4 * nd, payload.len());

        let edit = |at: usize, bytes: &[u8]| {
            let mut p = payload.to_vec();
            p[at..at + bytes.len()].copy_from_slice(bytes);
            inconsistent(&seal(&p))
        };
        assert!(edit(0, &(-1.0f64).to_le_bytes()).contains("k1"));
        assert!(edit(16, &[2]).contains("flags"));
        assert!(edit(32, &1u64.to_le_bytes()).contains("add up"));
        assert!(edit(40, &u64::MAX.to_le_bytes()).contains("add up"));
        assert!(edit(vocab_at, &[0xff]).contains("UTF-8"));
        assert!(edit(vocab_at, b"~").contains("sorted"));
        assert!(edit(ends_at + 4, &0u32.to_le_bytes()).contains("vocabulary offsets"));
        assert!(edit(offsets_at, &1u32.to_le_bytes()).contains("posting offsets"));
        assert!(edit(ids_at, &(nd as u32).to_le_bytes()).contains("doc ids"));
        assert!(edit(contrib_at, &f32::NAN.to_le_bytes()).contains("contributions"));
        assert!(edit(contrib_at, &0f32.to_le_bytes()).contains("contributions"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = decode(&with_magic);
        }

        #[test]
        fn random_sealed_payloads_never_panic(
            fixed in prop::collection::vec(any::<u8>(), FIXED_LEN - 32),
            counts in (0u64..6, 0u64..6, 0u64..12, 0u64..24),
            body in prop::collection::vec(any::<u8>(), 0..512),
        ) {
            let (nd, nt, np, vb) = counts;
            let mut p = fixed;
            for n in [nd, nt, np, vb] {
                p.extend_from_slice(&n.to_le_bytes());
            }
            let need = (vb + 4 * (2 * (nt + 1) + 2 * np + nd)) as usize;
            p.extend(body.iter().copied().cycle().take(if body.is_empty() { 0 } else { need }));
            if let Ok(idx) = decode(&seal(&p)) {
                let _ = idx.search("a b", 3, None);
            }
        }

        /// Plausible payloads (valid header fields, small values) reach the deep checks.
        #[test]
        fn plausible_payloads_are_checked_or_searchable(
            (nd, nt, np) in (0u32..5, 0u32..5, 0u32..10),
            text in "[ab]{0,8}",
            small in prop::collection::vec(0u32..12, 64),
            contrib in prop::collection::vec(prop::sample::select(vec![0.5f32, 1.0, 0.0, -1.0, f32::NAN]), 10),
        ) {
            let mut p = Vec::new();
            p.extend_from_slice(&1.2f64.to_le_bytes());
            p.extend_from_slice(&0.75f64.to_le_bytes());
            p.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]);
            for n in [2, u64::from(nd), u64::from(nt), u64::from(np), text.len() as u64] {
                p.extend_from_slice(&n.to_le_bytes());
            }
            p.extend_from_slice(text.as_bytes());
            let mut values = small.iter().copied();
            for n in [nt + 1, nt + 1, np] {
                for _ in 0..n {
                    p.extend_from_slice(&values.next().unwrap_or(0).to_le_bytes());
                }
            }
            for &c in contrib.iter().take(np as usize) {
                p.extend_from_slice(&c.to_le_bytes());
            }
            for _ in 0..nd {
                p.extend_from_slice(&values.next().unwrap_or(0).to_le_bytes());
            }
            if let Ok(idx) = decode(&seal(&p)) {
                for (doc, score) in idx.search("a b ab", 10, None) {
                    prop_assert!((doc as usize) < idx.num_docs() && score > 0.0);
                }
                let _ = idx.score_docs("ab", &[0, 1, 2]);
                prop_assert_eq!(decode(&encode(&idx)).unwrap(), idx);
            }
        }

        #[test]
        fn truncations_and_bit_flips_are_rejected(cut in 0usize..10_000, bit in 0usize..80_000) {
            let good = encode(&index());
            let cut = cut % good.len();
            prop_assert!(decode(&good[..cut]).is_err());
            let mut flipped = good.clone();
            let bit = bit % (8 * good.len());
            flipped[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode(&flipped).is_err());
        }
    }
}
