//! JSON syntax errors, worded the way V8's `JSON.parse` words them.
//!
//! The words after `Invalid JSON bridge event: SyntaxError: ` are our own
//! (docs/protocol.md §7.2 makes only the prefix normative), but they follow V8's
//! so that a message reads the same whichever host produced it. Positions
//! are in UTF-16 code units, like V8's.

use std::fmt;

use super::scan::{NumberFault, StringFault};

/// A JSON syntax error: V8's description and where it was found.
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

    /// `<what> in JSON at position <n>`, for the byte at `byte_pos` of `src`.
    pub(crate) fn at(src: &[u8], what: &str, byte_pos: usize) -> Self {
        let position = utf16_position(src, byte_pos);
        SyntaxError::new(format!("{what} in JSON at position {position}"), position)
    }

    /// The text ended where more was needed.
    pub(crate) fn end_of_input(src: &[u8]) -> Self {
        SyntaxError::new(
            "Unexpected end of JSON input".to_owned(),
            utf16_position(src, src.len()),
        )
    }

    /// `Unexpected token 'x', "…context…" is not valid JSON`, with V8's rule
    /// for the context: the whole text when it is shorter than 21 characters,
    /// otherwise up to 10 characters on each side of the token.
    pub(crate) fn unexpected_token(src: &[u8], byte_pos: usize) -> Self {
        if byte_pos >= src.len() {
            return Self::end_of_input(src);
        }
        let text = String::from_utf8_lossy(src);
        let before = String::from_utf8_lossy(&src[..byte_pos]);
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
            utf16_position(src, byte_pos),
        )
    }

    /// Why a string of `src` is not valid.
    pub(crate) fn in_string(src: &[u8], fault: StringFault) -> Self {
        match fault {
            StringFault::Unterminated => Self::at(src, "Unterminated string", src.len()),
            StringFault::EndOfInput => Self::end_of_input(src),
            StringFault::BadUnicodeEscape(at) => Self::at(src, "Bad Unicode escape", at),
            StringFault::BadEscape(at) => Self::at(src, "Bad escaped character", at),
            StringFault::ControlCharacter(at) => {
                Self::at(src, "Bad control character in string literal", at)
            }
        }
    }

    /// Why a number of `src` is not valid.
    pub(crate) fn in_number(src: &[u8], fault: NumberFault) -> Self {
        match fault {
            NumberFault::NoDigitAfterMinus(at) => Self::at(src, "No number after minus sign", at),
            NumberFault::LeadingZero(at) => Self::at(src, "Unexpected number", at),
            NumberFault::NoFraction(at) => Self::at(src, "Unterminated fractional number", at),
            NumberFault::NoExponent(at) => Self::at(src, "Exponent part is missing a number", at),
        }
    }
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for SyntaxError {}

fn utf16_position(src: &[u8], byte_pos: usize) -> usize {
    utf16_len(&src[..byte_pos.min(src.len())])
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
