use std::borrow::Cow;
use std::fmt;

use super::cursor::{JsonCursor, Kind};

/// A JSON syntax error, described the way V8's `JSON.parse` describes it.
///
/// Boxed so that the `Result`s on the scanner's hot paths stay small.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError(Box<SyntaxErrorDetails>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct SyntaxErrorDetails {
    message: String,
    position: usize,
}

impl SyntaxError {
    fn new(message: String, position: usize) -> Self {
        SyntaxError(Box::new(SyntaxErrorDetails { message, position }))
    }

    /// V8's wording, e.g. `Unexpected end of JSON input`.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Where the error was found, in UTF-16 code units from the start, like V8.
    pub fn position(&self) -> usize {
        self.0.position
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for SyntaxError {}

/// A [`JsonCursor`] over JSON text that accepts exactly what `JSON.parse`
/// accepts: RFC 8259 with whitespace limited to space, tab, LF and CR, any
/// `\uXXXX` escape (unpaired surrogates included), and numbers of any size.
///
/// It validates the syntax of everything it passes over, skipped values
/// included, so that a document is judged as a whole.
pub struct TextCursor<'a> {
    text: &'a str,
    src: &'a [u8],
    pos: usize,
    /// One flag per entered, still open container: `true` until its first
    /// member or element has been reached.
    open: Vec<bool>,
    /// Container kinds opened while skipping (`b'{'` or `b'['`), reused.
    skip_stack: Vec<u8>,
    /// Whether the string scanned last holds escapes.
    escaped: bool,
    /// Content range of the key scanned last.
    key: (usize, usize),
    /// When recording: the values passed over without their content being
    /// read (see [`Hole`]); `None` when not recording.
    holes: Option<Vec<Hole>>,
    /// Only holes of at least this many bytes are recorded.
    holes_from: usize,
    /// Whether this cursor's text was reopened (see [`TextCursor::holes`]).
    reopened: std::cell::Cell<bool>,
}

/// A string or number value that a cursor passed over without handing its
/// content to the caller (skipped, or only checked for being finite). A
/// document that differs from another only inside such values, each still of
/// the same kind, leads a validator through exactly the same decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hole {
    /// Byte range of the value, quotes included.
    pub start: usize,
    pub end: usize,
    pub kind: HoleKind,
}

/// What may fill a [`Hole`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoleKind {
    /// Any JSON string.
    String,
    /// Any JSON number that is plainly finite: fewer than 300 characters and
    /// no exponent.
    Number,
}

type Result<T> = std::result::Result<T, SyntaxError>;

impl<'a> TextCursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Self::at(text, 0)
    }

    /// A cursor that also records the [`Hole`]s it passes over.
    pub fn recording(text: &'a str) -> Self {
        Self::recording_from(text, 0)
    }

    /// A cursor that records the [`Hole`]s of at least `min_bytes` bytes.
    pub fn recording_from(text: &'a str, min_bytes: usize) -> Self {
        let mut cursor = Self::at(text, 0);
        cursor.holes = Some(Vec::new());
        cursor.holes_from = min_bytes;
        cursor
    }

    /// The holes passed over so far, in text order; `None` unless
    /// recording, or once the text was [reopened](JsonCursor::reopen) (the
    /// second reading may look inside values the first one passed over).
    pub fn holes(&self) -> Option<&[Hole]> {
        if self.reopened.get() {
            return None;
        }
        self.holes.as_deref()
    }

    fn record(&mut self, start: usize, kind: HoleKind) {
        if let Some(holes) = &mut self.holes {
            if self.pos - start >= self.holes_from {
                holes.push(Hole {
                    start,
                    end: self.pos,
                    kind,
                });
            }
        }
    }

    fn at(text: &'a str, pos: usize) -> Self {
        TextCursor {
            text,
            src: text.as_bytes(),
            pos,
            open: Vec::new(),
            skip_stack: Vec::new(),
            escaped: false,
            key: (0, 0),
            holes: None,
            holes_from: 0,
            reopened: std::cell::Cell::new(false),
        }
    }

    #[inline]
    fn skip_whitespace(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    #[inline]
    fn byte(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips whitespace and returns the next byte, failing at the end of input.
    #[inline]
    fn next_token(&mut self) -> Result<u8> {
        self.skip_whitespace();
        match self.byte() {
            Some(b) => Ok(b),
            None => Err(self.end_of_input()),
        }
    }

    // ---- errors, worded like V8 ------------------------------------------

    fn utf16_position(&self, byte_pos: usize) -> usize {
        utf16_len(&self.src[..byte_pos.min(self.src.len())])
    }

    fn error_at(&self, what: &str, byte_pos: usize) -> SyntaxError {
        let position = self.utf16_position(byte_pos);
        SyntaxError::new(format!("{what} in JSON at position {position}"), position)
    }

    fn end_of_input(&self) -> SyntaxError {
        SyntaxError::new(
            "Unexpected end of JSON input".to_owned(),
            self.utf16_position(self.src.len()),
        )
    }

    /// `Unexpected token 'x', "…context…" is not valid JSON`, with V8's rule
    /// for the context: the whole text when it is shorter than 21 characters,
    /// otherwise up to 10 characters on each side of the token.
    fn unexpected_token(&self, byte_pos: usize) -> SyntaxError {
        if byte_pos >= self.src.len() {
            return self.end_of_input();
        }
        let text = String::from_utf8_lossy(self.src);
        let before = String::from_utf8_lossy(&self.src[..byte_pos]);
        let chars_before = before.chars().count();
        let all: Vec<char> = text.chars().collect();
        let token = all[chars_before];
        let context = if all.len() < 21 {
            format!("\"{text}\"")
        } else {
            let start = chars_before.saturating_sub(10);
            let end = (chars_before + 10).min(all.len());
            let slice: String = all[start..end].iter().collect();
            let lead = if start > 0 { "..." } else { "" };
            let tail = if end < all.len() { "..." } else { "" };
            format!("{lead}\"{slice}\"{tail}")
        };
        SyntaxError::new(
            format!("Unexpected token '{token}', {context} is not valid JSON"),
            self.utf16_position(byte_pos),
        )
    }

    // ---- scalars -----------------------------------------------------------

    /// Scans the string starting at the opening quote under the cursor and
    /// leaves the cursor after the closing quote. Returns where the content
    /// ends (it starts after the quote) and records in `escaped` whether it
    /// holds escapes. (A returned span struct cost a store-forwarding stall
    /// per string: results of two words or less travel in registers.)
    fn scan_string(&mut self) -> Result<usize> {
        debug_assert_eq!(self.byte(), Some(b'"'));
        if let Some((end, escaped)) = string_end(self.src, self.pos) {
            self.pos = end + 1;
            self.escaped = escaped;
            return Ok(end);
        }
        Err(
            match scan_string_body(self.src, self.pos).expect_err("string_end failed") {
                StringFault::Unterminated => self.error_at("Unterminated string", self.src.len()),
                StringFault::EndOfInput => self.end_of_input(),
                StringFault::BadUnicodeEscape(at) => self.error_at("Bad Unicode escape", at),
                StringFault::BadEscape(at) => self.error_at("Bad escaped character", at),
                StringFault::ControlCharacter(at) => {
                    self.error_at("Bad control character in string literal", at)
                }
            },
        )
    }

    /// Scans a number under the cursor and returns its byte range.
    fn scan_number(&mut self) -> Result<(usize, usize)> {
        let start = self.pos;
        if let Some(end) = number_end(self.src, start) {
            self.pos = end;
            return Ok((start, end));
        }
        Err(
            match scan_number_body(self.src, start).expect_err("number_end failed") {
                NumberFault::NoDigitAfterMinus(at) => {
                    self.error_at("No number after minus sign", at)
                }
                NumberFault::LeadingZero(at) => self.error_at("Unexpected number", at),
                NumberFault::NoFraction(at) => self.error_at("Unterminated fractional number", at),
                NumberFault::NoExponent(at) => {
                    self.error_at("Exponent part is missing a number", at)
                }
            },
        )
    }

    fn scan_literal(&mut self, word: &[u8]) -> Result<()> {
        for (k, &expected) in word.iter().enumerate() {
            match self.src.get(self.pos + k) {
                None => return Err(self.end_of_input()),
                Some(&b) if b == expected => {}
                Some(_) => return Err(self.unexpected_token(self.pos + k)),
            }
        }
        self.pos += word.len();
        Ok(())
    }

    fn kind_of(&self, b: u8) -> Result<Kind> {
        Ok(match b {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' | b'f' => Kind::Bool,
            b'n' => Kind::Null,
            b'-' | b'0'..=b'9' => Kind::Number,
            _ => return Err(self.unexpected_token(self.pos)),
        })
    }

    /// Consumes a scalar (anything but an object or array) under the cursor.
    fn skip_scalar(&mut self, b: u8) -> Result<()> {
        let start = self.pos;
        match b {
            b'"' => {
                self.scan_string()?;
                self.record(start, HoleKind::String);
                Ok(())
            }
            b't' => self.scan_literal(b"true"),
            b'f' => self.scan_literal(b"false"),
            b'n' => self.scan_literal(b"null"),
            b'-' | b'0'..=b'9' => {
                self.scan_number()?;
                self.record(start, HoleKind::Number);
                Ok(())
            }
            _ => Err(self.unexpected_token(self.pos)),
        }
    }

    /// After `{` or `,` inside an object: reads `"key"` and the `:` after it.
    /// Records the key's content range in `key`; `escaped` tells whether it
    /// needs decoding.
    fn scan_key(&mut self, after_comma: bool) -> Result<()> {
        let b = self.next_token()?;
        if b != b'"' {
            let what = if after_comma {
                "Expected double-quoted property name"
            } else {
                "Expected property name or '}'"
            };
            return Err(self.error_at(what, self.pos));
        }
        let start = self.pos + 1;
        let end = self.scan_string()?;
        self.key = (start, end);
        if self.next_token()? != b':' {
            return Err(self.error_at("Expected ':' after property name", self.pos));
        }
        self.pos += 1;
        Ok(())
    }

    /// Whether the innermost open container has not reached its first
    /// member or element yet; clears the flag.
    fn take_first(&mut self) -> bool {
        match self.open.last_mut() {
            Some(first) => std::mem::replace(first, false),
            None => false,
        }
    }

    /// What `find` says about the key scanned last.
    fn key_index(&self, mut find: impl FnMut(&[u8]) -> Option<usize>) -> Option<usize> {
        let raw = &self.src[self.key.0..self.key.1];
        if self.escaped {
            return find(decode_string_content(raw).0.as_bytes());
        }
        find(raw)
    }
}

impl<'a> JsonCursor for TextCursor<'a> {
    type Error = SyntaxError;
    type Mark = usize;

    fn peek(&mut self) -> Result<Kind> {
        let b = self.next_token()?;
        self.kind_of(b)
    }

    fn skip(&mut self) -> Result<()> {
        let b = self.next_token()?;
        if b != b'{' && b != b'[' {
            return self.skip_scalar(b);
        }
        // Iterative on purpose: depth is controlled by the input.
        let stack = &mut std::mem::take(&mut self.skip_stack);
        stack.clear();
        let result = (|| {
            loop {
                // A value is expected here.
                let b = self.next_token()?;
                match b {
                    b'{' => {
                        self.pos += 1;
                        if self.next_token()? == b'}' {
                            self.pos += 1;
                        } else {
                            self.scan_key(false)?;
                            stack.push(b'{');
                            continue;
                        }
                    }
                    b'[' => {
                        self.pos += 1;
                        if self.next_token()? == b']' {
                            self.pos += 1;
                        } else {
                            stack.push(b'[');
                            continue;
                        }
                    }
                    _ => self.skip_scalar(b)?,
                }
                // A value has ended: close containers until one expects more.
                loop {
                    let Some(&top) = stack.last() else {
                        return Ok(());
                    };
                    let b = self.next_token()?;
                    if top == b'{' {
                        match b {
                            b',' => {
                                self.pos += 1;
                                self.scan_key(true)?;
                                break;
                            }
                            b'}' => {
                                self.pos += 1;
                                stack.pop();
                            }
                            _ => {
                                return Err(self.error_at(
                                    "Expected ',' or '}' after property value",
                                    self.pos,
                                ))
                            }
                        }
                    } else {
                        match b {
                            b',' => {
                                self.pos += 1;
                                break;
                            }
                            b']' => {
                                self.pos += 1;
                                stack.pop();
                            }
                            _ => {
                                return Err(self
                                    .error_at("Expected ',' or ']' after array element", self.pos))
                            }
                        }
                    }
                }
            }
        })();
        self.skip_stack = std::mem::take(stack);
        result
    }

    fn read_bool(&mut self) -> Result<bool> {
        let b = self.next_token()?;
        self.skip_scalar(b)?;
        Ok(b == b't')
    }

    fn read_finite_number(&mut self) -> Result<bool> {
        self.next_token()?;
        let (start, end) = self.scan_number()?;
        let literal = &self.src[start..end];
        if is_plainly_finite(literal) {
            self.record(start, HoleKind::Number);
            return Ok(true);
        }
        // JSON's number grammar is a subset of what Rust's float parser
        // accepts, and overflow gives infinity, as in JavaScript.
        let text = std::str::from_utf8(literal).unwrap_or("NaN");
        Ok(text.parse::<f64>().is_ok_and(f64::is_finite))
    }

    fn read_string(&mut self) -> Result<Cow<'_, str>> {
        self.next_token()?;
        let start = self.pos + 1;
        let end = self.scan_string()?;
        let raw = &self.src[start..end];
        if self.escaped {
            Ok(Cow::Owned(decode_string_content(raw).0))
        } else {
            // String contents start and end next to ASCII quotes, so they are
            // on character boundaries of the text.
            Ok(Cow::Borrowed(&self.text[start..end]))
        }
    }

    fn enter_object(&mut self) -> Result<()> {
        self.next_token()?;
        self.pos += 1;
        self.open.push(true);
        Ok(())
    }

    fn next_member<F>(&mut self, find: F) -> Result<Option<Option<usize>>>
    where
        F: FnMut(&[u8]) -> Option<usize>,
    {
        let first = self.take_first();
        let b = self.next_token()?;
        if first {
            if b == b'}' {
                self.pos += 1;
                self.open.pop();
                return Ok(None);
            }
            self.scan_key(false)?
        } else {
            match b {
                b',' => {
                    self.pos += 1;
                    self.scan_key(true)?
                }
                b'}' => {
                    self.pos += 1;
                    self.open.pop();
                    return Ok(None);
                }
                _ => {
                    return Err(self.error_at("Expected ',' or '}' after property value", self.pos))
                }
            }
        }
        Ok(Some(self.key_index(find)))
    }

    fn enter_array(&mut self) -> Result<()> {
        self.next_token()?;
        self.pos += 1;
        self.open.push(true);
        Ok(())
    }

    fn next_element(&mut self) -> Result<bool> {
        let first = self.take_first();
        let b = self.next_token()?;
        if b == b']' && first {
            self.pos += 1;
            self.open.pop();
            return Ok(false);
        }
        if first {
            return Ok(true);
        }
        match b {
            b',' => {
                self.pos += 1;
                Ok(true)
            }
            b']' => {
                self.pos += 1;
                self.open.pop();
                Ok(false)
            }
            _ => Err(self.error_at("Expected ',' or ']' after array element", self.pos)),
        }
    }

    fn mark(&mut self) -> Result<usize> {
        self.skip_whitespace();
        Ok(self.pos)
    }

    fn reopen(&self, mark: &usize) -> Self {
        self.reopened.set(true);
        Self::at(self.text, *mark)
    }

    fn end(&mut self) -> Result<()> {
        self.skip_whitespace();
        if self.pos < self.src.len() {
            return Err(self.error_at("Unexpected non-whitespace character after JSON", self.pos));
        }
        Ok(())
    }
}

/// Why the text at a position is not a JSON string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StringFault {
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

#[inline(always)]
fn scan_string_body(src: &[u8], quote: usize) -> std::result::Result<(usize, bool), StringFault> {
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
enum NumberFault {
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

#[inline(always)]
fn scan_number_body(src: &[u8], start: usize) -> std::result::Result<usize, NumberFault> {
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

/// Number of UTF-16 code units in valid UTF-8 text.
fn utf16_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0xBF => 0,
            0xF0..=0xFF => 2,
            _ => 1,
        })
        .sum()
}

/// Index of the first byte at or after `i` that ends the plain part of a
/// string: a quote, a backslash or a control character; `src.len()` if none.
/// This loop is where large payloads spend their time: 16 bytes at a time
/// with SSE2 (part of every x86-64 CPU), 8 at a time elsewhere.
#[inline]
fn find_string_special(src: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is in the x86-64 baseline, and every 16-byte load
        // starts at `i` with `i + 16 <= src.len()`.
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
                    return i + mask.trailing_zeros() as usize;
                }
                i += 16;
            }
        }
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

/// Decodes the content of a syntactically valid JSON string (without its
/// quotes). Returns the text, with each unpaired surrogate escape replaced by
/// U+FFFD, and the first unpaired surrogate found, if any.
pub fn decode_string_content(raw: &[u8]) -> (String, Option<u16>) {
    if !raw.contains(&b'\\') {
        // Valid JSON text is valid UTF-8.
        return (String::from_utf8_lossy(raw).into_owned(), None);
    }
    let mut units = Vec::with_capacity(raw.len());
    decode_string_units(raw, |unit| units.push(unit));
    let mut lone = None;
    let text = char::decode_utf16(units)
        .map(|c| {
            c.unwrap_or_else(|error| {
                lone.get_or_insert(error.unpaired_surrogate());
                char::REPLACEMENT_CHARACTER
            })
        })
        .collect();
    (text, lone)
}

/// Calls `emit` with each UTF-16 code unit of the content of a syntactically
/// valid JSON string (without its quotes): the units `JSON.parse` gives,
/// unpaired surrogates included.
pub(crate) fn decode_string_units(raw: &[u8], mut emit: impl FnMut(u16)) {
    let mut i = 0;
    while i < raw.len() {
        let plain_end = raw[i..]
            .iter()
            .position(|&b| b == b'\\')
            .map_or(raw.len(), |p| i + p);
        // Valid JSON text is valid UTF-8 and escapes start at ASCII bytes.
        let plain = std::str::from_utf8(&raw[i..plain_end]).unwrap_or_default();
        plain.encode_utf16().for_each(&mut emit);
        i = plain_end;
        if i >= raw.len() {
            break;
        }
        let unit = match raw.get(i + 1) {
            Some(b'u') => {
                let hex = std::str::from_utf8(&raw[i + 2..i + 6]).unwrap_or("0");
                i += 6;
                u16::from_str_radix(hex, 16).unwrap_or(0)
            }
            Some(&escape) => {
                i += 2;
                match escape {
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    b'n' => 0x0A,
                    b'r' => 0x0D,
                    b't' => 0x09,
                    other => u16::from(other), // `"`, `\` and `/`
                }
            }
            None => break,
        };
        emit(unit);
    }
}

#[cfg(test)]
mod tests {
    use super::decode_string_content;

    #[test]
    fn string_content_decodes_escapes_pairs_and_unpaired_surrogates() {
        let decode = |raw: &str| decode_string_content(raw.as_bytes());
        assert_eq!(decode("plain é"), ("plain é".into(), None));
        assert_eq!(
            decode(r#"a\"\\\/\b\f\n\r\t\u00e9"#),
            ("a\"\\/\u{8}\u{c}\n\r\té".into(), None)
        );
        assert_eq!(decode(r"\ud83d\ude00!"), ("😀!".into(), None));
        assert_eq!(decode(r"x\ud83dy"), ("x\u{fffd}y".into(), Some(0xD83D)));
        assert_eq!(decode(r"\ud83d\u0041"), ("\u{fffd}A".into(), Some(0xD83D)));
        assert_eq!(
            decode(r"\ude00\ud800"),
            ("\u{fffd}\u{fffd}".into(), Some(0xDE00))
        );
        assert_eq!(
            decode(r"\ud800\ud83d\ude00"),
            ("\u{fffd}😀".into(), Some(0xD800))
        );
    }
}
