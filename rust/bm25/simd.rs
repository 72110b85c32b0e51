//! Vectorized kernels of the search: adding a row of range maxima to the bounds (with
//! AVX-512 / AVX2 builds chosen at run time), selecting the bounds in a window, and software
//! prefetch.

/// `bounds[r] += max * step` for every range `r` (`= max * step` without `add`), `max` from
/// `row[r]` (see [`RangeMax::maxima`](super::RangeMax::maxima)).
///
/// Runs the AVX-512 or AVX2 build of the loop when the CPU has it (16 or 8 ranges per
/// instruction instead of 4; the same results: no fused multiply-add).
pub(super) fn add_row(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F
        return unsafe { add_row_avx512(bounds, row, step, add) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2
        return unsafe { add_row_avx2(bounds, row, step, add) };
    }
    add_row_portable(bounds, row, step, add);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_row_avx2(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    add_row_portable(bounds, row, step, add);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn add_row_avx512(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    add_row_portable(bounds, row, step, add);
}

#[inline(always)]
pub(super) fn add_row_portable(bounds: &mut [f32], row: &[u8], step: f32, add: bool) {
    if add {
        for (u, &max) in bounds.iter_mut().zip(row) {
            *u += f32::from(max) * step;
        }
    } else {
        for (u, &max) in bounds.iter_mut().zip(row) {
            *u = f32::from(max) * step;
        }
    }
}

/// Calls `f(r, bounds[r])` for every `r` (increasing) with a positive bound in `lo..below`
/// (`lo..` without `below`), 16 bounds at a time with a branch-free test.
pub(super) fn select(bounds: &[f32], lo: f32, below: Option<f32>, mut f: impl FnMut(usize, f32)) {
    let (limit, limited) = (below.unwrap_or(f32::INFINITY), below.is_some());
    let wanted = |u: f32| (u >= lo) & ((u < limit) | !limited) & (u > 0.0);
    for (c, chunk) in bounds.chunks(16).enumerate() {
        let mut mask = chunk
            .iter()
            .enumerate()
            .fold(0u32, |mask, (i, &u)| mask | u32::from(wanted(u)) << i);
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            f(c * 16 + i, chunk[i]);
            mask &= mask - 1;
        }
    }
}
/// Asks the CPU to start loading `v[i]` into cache (nothing if out of bounds or not x86-64).
#[inline(always)]
pub(super) fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(i) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86-64 baseline, and a prefetch has no effect on
        // memory; `x` is a valid reference anyway
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}
