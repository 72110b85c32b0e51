//! Memory placement of the index's large arrays: transparent huge pages.
//!
//! A query reads a few hundred cache lines scattered over ~30 MB of postings, contributions
//! and range cells. With 4 KiB pages nearly every one of those lines sits on its own page, so
//! a query served after other work (its lines no longer cached) also misses the TLB on most
//! of them, and each miss walks the page tables. Backing the arrays with 2 MiB pages makes
//! the whole index a few dozen TLB entries.
//!
//! Linux serves huge pages to regions that ask for them when `transparent_hugepage/enabled`
//! is `madvise` (a common default) or `always`. The advice only shapes the page faults to
//! come, so [`huge_zeroed`] gives it between allocating an array and writing it: the first
//! write then faults whole 2 MiB pages in, and nothing is copied. That is how a loaded index
//! gets its pages (large reads land in fresh memory). A build, though, allocates its arrays
//! after freeing its working buffers, and the allocator hands some of that memory back
//! already written, in 4 KiB pages: [`collapse_huge_pages`] then copies them into huge pages
//! (`MADV_COLLAPSE`, Linux 6.1+). Collapsing everything instead of advising first costs +40%
//! on loading an 8× vLLM index. Both calls are advice: when the kernel refuses, the arrays are
//! the same, only slower to search.

/// Size of a transparent huge page on x86-64 and most arm64 kernels.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1; not in every `libc`).
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// A vector of `n` copies of `zero` (all-zero bytes), its memory advised to be backed by huge
/// pages before it is first written.
pub fn huge_zeroed<T: Copy>(n: usize, zero: T) -> Vec<T> {
    let v = vec![zero; n];
    advise_huge_pages(&v);
    v
}

/// Asks the kernel to back the whole huge pages inside `v` with 2 MiB pages from their next
/// page fault on; returns the bytes covered (0 when `v` is too small to hold one aligned huge
/// page, or off Linux).
pub fn advise_huge_pages<T>(v: &[T]) -> usize {
    #[cfg(target_os = "linux")]
    return advise(v, libc::MADV_HUGEPAGE);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = v;
        0
    };
}

/// Backs the whole huge pages inside `v` with 2 MiB pages now, copying the pages already
/// written (huge pages stay as they are); returns the bytes covered, as
/// [`advise_huge_pages`].
pub fn collapse_huge_pages<T>(v: &[T]) -> usize {
    #[cfg(target_os = "linux")]
    return advise(v, MADV_COLLAPSE);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = v;
        0
    };
}

/// `madvise(advice)` over the whole huge pages inside `v`; the bytes covered.
#[cfg(target_os = "linux")]
fn advise<T>(v: &[T], advice: libc::c_int) -> usize {
    let start = v.as_ptr() as usize;
    let end = start + std::mem::size_of_val(v);
    let lo = start.next_multiple_of(HUGE_PAGE);
    let hi = end / HUGE_PAGE * HUGE_PAGE;
    if hi <= lo {
        return 0;
    }
    // SAFETY: `lo..hi` lies inside the live allocation of `v`; the call only changes how the
    // kernel backs those pages, never their contents, and reports failure by return value
    // (ignored: a refusal leaves the pages as they were)
    unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, advice) };
    hi - lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_keeps_contents_and_covers_only_whole_pages() {
        let mut v = huge_zeroed(3_000_000, 0u32);
        assert!(v.iter().all(|&x| x == 0));
        v.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32);
        let covered = advise_huge_pages(&v);
        assert_eq!(collapse_huge_pages(&v), covered);
        assert!(covered <= std::mem::size_of_val(&v[..]));
        if cfg!(target_os = "linux") {
            // 12 MB hold at least four aligned 2 MiB pages
            assert!(covered >= 4 * (2 << 20), "covered {covered}");
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        assert_eq!(advise_huge_pages(&v[..10]), 0);
        assert_eq!(collapse_huge_pages(&v[..10]), 0);
        assert_eq!(advise_huge_pages::<u64>(&[]), 0);
    }
}
