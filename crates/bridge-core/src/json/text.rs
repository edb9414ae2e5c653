//! [`TextCursor`]: a [`JsonCursor`] over JSON text, with exactly the
//! syntax `JSON.parse` accepts, that can record the values it passes over
//! without reading them ([`Hole`]s, for the shape memory).

use std::borrow::Cow;

use super::cursor::{JsonCursor, Kind};
use super::error::SyntaxError;
use super::escape::decode_string_content;
use super::scan::{is_plainly_finite, number_end, scan_number_body, scan_string_body, string_end};

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

    /// The byte offset the cursor has read up to: right after the value
    /// consumed last (a snapshot check cuts a member out of the text by it).
    pub fn offset(&self) -> usize {
        self.pos
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
            None => Err(SyntaxError::end_of_input(self.src)),
        }
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
        let fault = scan_string_body(self.src, self.pos).expect_err("string_end failed");
        Err(SyntaxError::in_string(self.src, fault))
    }

    /// Scans a number under the cursor and returns its byte range.
    fn scan_number(&mut self) -> Result<(usize, usize)> {
        let start = self.pos;
        if let Some(end) = number_end(self.src, start) {
            self.pos = end;
            return Ok((start, end));
        }
        let fault = scan_number_body(self.src, start).expect_err("number_end failed");
        Err(SyntaxError::in_number(self.src, fault))
    }

    fn scan_literal(&mut self, word: &[u8]) -> Result<()> {
        for (k, &expected) in word.iter().enumerate() {
            match self.src.get(self.pos + k) {
                None => return Err(SyntaxError::end_of_input(self.src)),
                Some(&b) if b == expected => {}
                Some(_) => return Err(SyntaxError::unexpected_token(self.src, self.pos + k)),
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
            _ => return Err(SyntaxError::unexpected_token(self.src, self.pos)),
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
            _ => Err(SyntaxError::unexpected_token(self.src, self.pos)),
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
            return Err(SyntaxError::at(self.src, what, self.pos));
        }
        let start = self.pos + 1;
        let end = self.scan_string()?;
        self.key = (start, end);
        if self.next_token()? != b':' {
            return Err(SyntaxError::at(
                self.src,
                "Expected ':' after property name",
                self.pos,
            ));
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
                                return Err(SyntaxError::at(
                                    self.src,
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
                                return Err(SyntaxError::at(
                                    self.src,
                                    "Expected ',' or ']' after array element",
                                    self.pos,
                                ))
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
                    return Err(SyntaxError::at(
                        self.src,
                        "Expected ',' or '}' after property value",
                        self.pos,
                    ))
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
            _ => Err(SyntaxError::at(
                self.src,
                "Expected ',' or ']' after array element",
                self.pos,
            )),
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
            return Err(SyntaxError::at(
                self.src,
                "Unexpected non-whitespace character after JSON",
                self.pos,
            ));
        }
        Ok(())
    }
}
