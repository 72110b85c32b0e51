//! Memory placement of the index's large arrays: transparent huge pages.
//!
//! A query reads a few hundred cache lines scattered over ~30 MB of postings, contributions
//! and range cells. With 4 KiB pages nearly every one of those lines sits on its own page, so
//! a query served after other work (its lines no longer cached) also misses the TLB on most
//! of them, and each miss walks the page tables. Backing the arrays with 2 MiB pages makes
//! the whole index a few dozen TLB entries. Linux only serves huge pages to regions that ask
//! for them when `transparent_hugepage/enabled` is `madvise` (a common default), so each
//! array asks, then has its existing pages collapsed at once (`MADV_COLLAPSE`, Linux 6.1+)
//! rather than waiting for the kernel's background thread. Both requests are advice: when
//! the kernel refuses them the arrays stay as they were, correct and only slower.

/// Size of a transparent huge page on x86-64 and most arm64 kernels.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1): collapse the range into huge pages now (not in every `libc`).
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// Asks the kernel to back the whole huge pages inside `v` with 2 MiB pages; returns the
/// bytes covered (0 when `v` is too small to hold one aligned huge page, or off Linux).
pub fn advise_huge_pages<T>(v: &[T]) -> usize {
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let end = start + std::mem::size_of_val(v);
        let lo = start.next_multiple_of(HUGE_PAGE);
        let hi = end / HUGE_PAGE * HUGE_PAGE;
        if hi <= lo {
            return 0;
        }
        let (addr, len) = (lo as *mut libc::c_void, hi - lo);
        // SAFETY: `lo..hi` lies inside the live allocation of `v`; both calls only change how
        // the kernel backs those pages, never their contents, and report failure by return
        // value (ignored: a refusal leaves the pages as they were)
        unsafe {
            libc::madvise(addr, len, libc::MADV_HUGEPAGE);
            libc::madvise(addr, len, MADV_COLLAPSE);
        }
        hi - lo
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = v;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_keeps_contents_and_covers_only_whole_pages() {
        let v: Vec<u32> = (0..3_000_000).collect();
        let covered = advise_huge_pages(&v);
        assert!(covered <= std::mem::size_of_val(&v[..]));
        if cfg!(target_os = "linux") {
            // 12 MB hold at least four aligned 2 MiB pages
            assert!(covered >= 4 * (2 << 20), "covered {covered}");
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        assert_eq!(advise_huge_pages(&v[..10]), 0);
        assert_eq!(advise_huge_pages::<u64>(&[]), 0);
    }
}
