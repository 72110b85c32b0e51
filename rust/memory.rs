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
//! on loading an 8× vLLM index (see the scaling section of `benches/RESULTS.md`).
//!
//! Both calls report what the kernel did: the bytes advised, or its refusal (`EINVAL` from a
//! kernel without transparent huge pages or, for `MADV_COLLAPSE`, older than 6.1; `EAGAIN` or
//! `ENOMEM` when it has no huge page to spare). The index treats a refusal as what it is,
//! advice not taken: the arrays are the same, only slower to search.

use std::io;
use std::ops::Range;

/// Size of a transparent huge page on x86-64 and most arm64 kernels.
pub const HUGE_PAGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1; not in every `libc`).
#[cfg(target_os = "linux")]
const MADV_COLLAPSE: libc::c_int = 25;

/// A vector of `n` copies of `zero` (all-zero bytes), its memory advised to be backed by huge
/// pages before it is first written (when the kernel refuses, an ordinary vector).
pub fn huge_zeroed<T: Copy>(n: usize, zero: T) -> Vec<T> {
    let v = vec![zero; n];
    // advice: a refusal leaves the vector as it is
    let _ = advise_huge_pages(&v);
    v
}

/// Asks the kernel to back the whole huge pages inside `v` with 2 MiB pages from their next
/// page fault on; returns the bytes covered (0, without asking, when `v` holds no aligned huge
/// page or off Linux), or the kernel's refusal.
pub fn advise_huge_pages<T>(v: &[T]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    return advise(v, libc::MADV_HUGEPAGE);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = v;
        Ok(0)
    };
}

/// Backs the whole huge pages inside `v` with 2 MiB pages now, copying the pages already
/// written (huge pages stay as they are); returns the bytes covered or the kernel's refusal,
/// as [`advise_huge_pages`].
pub fn collapse_huge_pages<T>(v: &[T]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    return advise(v, MADV_COLLAPSE);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = v;
        Ok(0)
    };
}

/// The addresses of the whole huge pages inside `start..start + len`: from the first
/// [`HUGE_PAGE`] boundary at or after `start` to the last at or before the end (empty when
/// there is none).
pub fn whole_huge_pages(start: usize, len: usize) -> Range<usize> {
    let lo = start.next_multiple_of(HUGE_PAGE);
    let hi = (start + len) / HUGE_PAGE * HUGE_PAGE;
    if hi <= lo {
        return lo..lo;
    }
    lo..hi
}

/// `madvise(advice)` over the whole huge pages inside `v`: the bytes covered, or the error
/// the kernel answered with.
#[cfg(target_os = "linux")]
fn advise<T>(v: &[T], advice: libc::c_int) -> io::Result<usize> {
    let pages = whole_huge_pages(v.as_ptr() as usize, std::mem::size_of_val(v));
    if pages.is_empty() {
        return Ok(0);
    }
    // SAFETY: `pages` lies inside the live allocation of `v`; the call only changes how the
    // kernel backs those pages, never their contents
    let status = unsafe { libc::madvise(pages.start as *mut libc::c_void, pages.len(), advice) };
    if status == 0 {
        Ok(pages.len())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_huge_pages_are_covered() {
        const H: usize = HUGE_PAGE;
        assert_eq!(whole_huge_pages(0, 3 * H), 0..3 * H);
        assert_eq!(whole_huge_pages(1, 3 * H), H..3 * H);
        assert_eq!(whole_huge_pages(H - 1, 2 * H + 1), H..3 * H);
        assert_eq!(whole_huge_pages(5 * H + 16, 3 * H), 6 * H..8 * H);
        // less than one aligned page: nothing, even when the bytes span a boundary
        assert!(whole_huge_pages(H / 2, H).is_empty());
        assert!(whole_huge_pages(H, H - 1).is_empty());
        assert!(whole_huge_pages(7, 0).is_empty());
    }

    #[test]
    fn small_or_empty_arrays_ask_nothing() {
        let v = vec![1u32; 10];
        assert_eq!(advise_huge_pages(&v).unwrap(), 0);
        assert_eq!(collapse_huge_pages(&v).unwrap(), 0);
        assert_eq!(advise_huge_pages::<u64>(&[]).unwrap(), 0);
    }

    /// Whether the kernel has transparent huge pages (without them `MADV_HUGEPAGE` is
    /// `EINVAL`).
    #[cfg(target_os = "linux")]
    fn kernel_has_thp() -> bool {
        std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
    }

    /// The `VmFlags` of the mapping of this process that contains `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.split_whitespace().map(String::from).collect();
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// A fresh anonymous mapping of `len` bytes, unmapped when dropped: no other allocation
    /// shares its pages, so their flags are this test's alone.
    #[cfg(target_os = "linux")]
    struct Mapping(*mut u8, usize);

    #[cfg(target_os = "linux")]
    impl Mapping {
        fn new(len: usize) -> Self {
            // SAFETY: a new private anonymous mapping, checked below
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Self(p.cast(), len)
        }

        /// `n` `u32`s from byte `offset` on (`offset` a multiple of 4).
        fn u32s(&mut self, offset: usize, n: usize) -> &mut [u32] {
            assert!(offset.is_multiple_of(4) && offset + 4 * n <= self.1);
            // SAFETY: inside the mapping, aligned, zero-filled, borrowed mutably from `self`
            unsafe { std::slice::from_raw_parts_mut(self.0.add(offset).cast(), n) }
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, no longer borrowed
            unsafe { libc::munmap(self.0.cast(), self.1) };
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_takes_the_advice_on_exactly_the_whole_pages() {
        let mut map = Mapping::new(8 * HUGE_PAGE);
        // ~12 MB starting just past a 4 KiB page (as a `malloc`ed block does): at least four
        // aligned 2 MiB pages, with a partial huge page at each end
        let base = map.0 as usize;
        let offset = base.next_multiple_of(HUGE_PAGE) - base + HUGE_PAGE / 2 + 4096 + 16;
        let v = map.u32s(offset, 3_000_000);
        v.iter_mut().enumerate().for_each(|(i, x)| *x = i as u32);
        let (start, len) = (v.as_ptr() as usize, std::mem::size_of_val(&v[..]));
        let pages = whole_huge_pages(start, len);
        assert!(pages.len() >= 4 * HUGE_PAGE);
        assert!(start < pages.start && pages.end < start + len);
        let hg = |addr: usize| vm_flags(addr).iter().any(|f| f == "hg");
        match advise_huge_pages(v) {
            Ok(covered) => {
                assert!(kernel_has_thp(), "MADV_HUGEPAGE accepted without THP");
                assert_eq!(covered, pages.len());
                // the kernel marks the advised pages (`hg`), and only them
                assert!(hg(pages.start) && hg(pages.end - 1));
                assert!(!hg(pages.start - 1) && !hg(pages.end));
            }
            Err(e) => {
                assert!(!kernel_has_thp(), "MADV_HUGEPAGE refused: {e}");
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
            }
        }
        // collapsing copies the written pages: it may fail for want of free huge pages
        // (EAGAIN, ENOMEM) or on a kernel before 6.1 (EINVAL), never silently
        match collapse_huge_pages(v) {
            Ok(covered) => assert_eq!(covered, pages.len()),
            Err(e) => {
                let errno = e.raw_os_error();
                let known = [libc::EINVAL, libc::EAGAIN, libc::ENOMEM];
                assert!(errno.is_some_and(|n| known.contains(&n)), "{e}");
            }
        }
        // advice never changes contents
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        let fresh = huge_zeroed(3_000_000, 0u32);
        assert!(fresh.iter().all(|&x| x == 0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_refusal_is_reported_with_its_errno() {
        let v = vec![0u8; 8 * HUGE_PAGE];
        // no such advice: the kernel answers EINVAL, and the caller sees it
        let e = advise(&v, -1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
