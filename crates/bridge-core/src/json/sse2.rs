//! The x86-64 fast path of [`super::scan::find_string_special`]: 16 bytes
//! per step with SSE2, which every x86-64 CPU has, so no run-time detection
//! is needed. Other architectures use the portable 8-byte loop in `scan`.

use std::arch::x86_64::{
    __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
    _mm_set1_epi8,
};

/// `Ok(index)` of the first quote, backslash or control character at or
/// after `i`, if found in whole 16-byte blocks; otherwise `Err(index)` of
/// the first byte not examined (fewer than 16 remain), for the caller's
/// portable loop to finish.
#[inline]
pub(super) fn find_string_special(src: &[u8], mut i: usize) -> Result<usize, usize> {
    // SAFETY: SSE2 is in the x86-64 baseline, so the intrinsics are
    // available; each 16-byte unaligned load starts at `i` with
    // `i + 16 <= src.len()`, so it reads inside `src`.
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let below_space = _mm_set1_epi8(0x1F);
        while i + 16 <= src.len() {
            let chunk = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
            // A byte is a control character iff max(byte, 0x1F) == 0x1F (unsigned).
            let control = _mm_cmpeq_epi8(_mm_max_epu8(chunk, below_space), below_space);
            let hits = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(chunk, quote),
                    _mm_cmpeq_epi8(chunk, backslash),
                ),
                control,
            );
            let mask = _mm_movemask_epi8(hits) as u32;
            if mask != 0 {
                return Ok(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
    }
    Err(i)
}
