//! Scanners for JSON scalars over raw text: where a string or a number ends,
//! and why it is not valid when it is not.
//!
//! They judge syntax only and allocate nothing, so every reader of JSON text
//! in the crate shares them: the text cursor ([`super::TextCursor`]), the
//! shape memory's hole checks (`memo`) and the lifting scan (`lift`).

/// Why the text at a position is not a JSON string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StringFault {
    Unterminated,
    EndOfInput,
    BadUnicodeEscape(usize),
    BadEscape(usize),
    ControlCharacter(usize),
}

/// Scans the JSON string whose opening quote is at `quote`. Returns the
/// position of its closing quote and whether it holds escapes, or `None` if
/// it is not a valid string ([`scan_string_body`] tells why). A result of
/// two words travels in registers: with the fault's position in it, every
/// call paid a store-forwarding stall.
#[inline]
pub(crate) fn string_end(src: &[u8], quote: usize) -> Option<(usize, bool)> {
    scan_string_body(src, quote).ok()
}

/// [`string_end`] with the reason for a failure.
#[inline(always)]
pub(crate) fn scan_string_body(src: &[u8], quote: usize) -> Result<(usize, bool), StringFault> {
    let mut i = quote + 1;
    let mut escaped = false;
    loop {
        i = find_string_special(src, i);
        match src.get(i) {
            None => return Err(StringFault::Unterminated),
            Some(b'"') => return Ok((i, escaped)),
            Some(b'\\') => {
                escaped = true;
                match src.get(i + 1) {
                    None => return Err(StringFault::EndOfInput),
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => {
                        for k in 0..4 {
                            match src.get(i + 2 + k) {
                                None => return Err(StringFault::EndOfInput),
                                Some(h) if h.is_ascii_hexdigit() => {}
                                Some(_) => return Err(StringFault::BadUnicodeEscape(i + 2 + k)),
                            }
                        }
                        i += 6;
                    }
                    Some(_) => return Err(StringFault::BadEscape(i + 1)),
                }
            }
            Some(_) => return Err(StringFault::ControlCharacter(i)),
        }
    }
}

/// Why the text at a position is not a JSON number (each with where).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumberFault {
    NoDigitAfterMinus(usize),
    LeadingZero(usize),
    NoFraction(usize),
    NoExponent(usize),
}

/// Scans the JSON number starting at `start`; returns where it ends, or
/// `None` if it is not a valid number ([`scan_number_body`] tells why).
#[inline]
pub(crate) fn number_end(src: &[u8], start: usize) -> Option<usize> {
    scan_number_body(src, start).ok()
}

/// [`number_end`] with the reason for a failure.
#[inline(always)]
pub(crate) fn scan_number_body(src: &[u8], start: usize) -> Result<usize, NumberFault> {
    let digit = |i: usize| src.get(i).is_some_and(u8::is_ascii_digit);
    let mut i = start;
    if src.get(i) == Some(&b'-') {
        i += 1;
        if !digit(i) {
            return Err(NumberFault::NoDigitAfterMinus(i));
        }
    }
    if src.get(i) == Some(&b'0') {
        i += 1;
        if digit(i) {
            return Err(NumberFault::LeadingZero(i));
        }
    } else {
        while digit(i) {
            i += 1;
        }
    }
    if src.get(i) == Some(&b'.') {
        i += 1;
        if !digit(i) {
            return Err(NumberFault::NoFraction(i));
        }
        while digit(i) {
            i += 1;
        }
    }
    if matches!(src.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(src.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digit(i) {
            return Err(NumberFault::NoExponent(i));
        }
        while digit(i) {
            i += 1;
        }
    }
    Ok(i)
}

/// Whether a number literal is finite without converting it: without an
/// exponent, fewer than 309 digits always fit a double.
pub(crate) fn is_plainly_finite(literal: &[u8]) -> bool {
    literal.len() < 300 && !literal.iter().any(|&b| b == b'e' || b == b'E')
}

/// Index of the first byte at or after `i` that ends the plain part of a
/// string: a quote, a backslash or a control character; `src.len()` if none.
/// This loop is where large payloads spend their time: 16 bytes at a time
/// with SSE2 (part of every x86-64 CPU, [`super::sse2`]), 8 at a time
/// elsewhere. Both give the same answer; the SWAR loop below is also what
/// finishes the last bytes on x86-64.
#[inline]
pub(crate) fn find_string_special(src: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    match super::sse2::find_string_special(src, i) {
        Ok(found) => return found,
        Err(rest) => i = rest,
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = src.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // Per byte: "is zero" for the two comparisons, "is below 0x20" for the
        // word itself. The lowest flagged byte of each term is exact.
        let hits = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word);
        let hits = hits & HIGHS;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = src.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time definition the fast paths must agree with.
    fn reference(src: &[u8], i: usize) -> usize {
        src[i..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .map_or(src.len(), |p| i + p)
    }

    #[test]
    fn find_string_special_agrees_with_the_definition_at_every_offset() {
        let mut src: Vec<u8> = (0..100u8).map(|b| b'a' + b % 26).collect();
        for special in [b'"', b'\\', 0x00, 0x1F, b'\n'] {
            for at in 0..src.len() {
                let saved = src[at];
                src[at] = special;
                for start in 0..src.len() {
                    assert_eq!(
                        find_string_special(&src, start),
                        reference(&src, start),
                        "special {special:#x} at {at}, start {start}"
                    );
                }
                src[at] = saved;
            }
        }
        // Bytes from 0x20 up, UTF-8 lead and continuation bytes included, are plain.
        let plain: Vec<u8> = (0x20..=0xFFu8)
            .filter(|&b| b != b'"' && b != b'\\')
            .collect();
        assert_eq!(find_string_special(&plain, 0), plain.len());
    }
}
