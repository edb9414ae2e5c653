//! Escapes inside JSON strings: decoding string content to the text (or the
//! UTF-16 code units) `JSON.parse` gives, and finding escapes in JSON text.

/// One escape sequence (`\n`, `\\`, `\u00e9`, …) in JSON text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Escape {
    /// Byte offset of its backslash.
    pub(crate) at: usize,
    /// Byte offset just after it.
    pub(crate) end: usize,
    /// The UTF-16 code unit it stands for (an unpaired surrogate included).
    pub(crate) unit: u16,
}

/// The escapes of syntactically valid JSON text, in order: either one
/// string's content or a whole document (backslashes occur only inside
/// strings, so no string tracking is needed).
pub(crate) fn escapes(text: &[u8]) -> impl Iterator<Item = Escape> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || {
        let at = from + memchr::memchr(b'\\', text.get(from..)?)?;
        let (unit, len) = match text.get(at + 1) {
            Some(b'u') => {
                let hex = text
                    .get(at + 2..at + 6)
                    .and_then(|h| std::str::from_utf8(h).ok())?;
                (u16::from_str_radix(hex, 16).ok()?, 6)
            }
            Some(&escape) => {
                let unit = match escape {
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    b'n' => 0x0A,
                    b'r' => 0x0D,
                    b't' => 0x09,
                    other => u16::from(other), // `"`, `\` and `/`
                };
                (unit, 2)
            }
            None => return None,
        };
        from = at + len;
        Some(Escape {
            at,
            end: from,
            unit,
        })
    })
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
    let mut plain_from = 0;
    for escape in escapes(raw) {
        plain(&raw[plain_from..escape.at]).for_each(&mut emit);
        emit(escape.unit);
        plain_from = escape.end;
    }
    plain(&raw[plain_from..]).for_each(emit);
}

/// The UTF-16 code units of the text between escapes. Valid JSON text is
/// valid UTF-8, and escapes start at ASCII bytes.
fn plain(bytes: &[u8]) -> std::str::EncodeUtf16<'_> {
    std::str::from_utf8(bytes)
        .unwrap_or_default()
        .encode_utf16()
}

/// The first UTF-16 surrogate escape of valid JSON text that is not part of
/// a high-low pair: where its backslash is, and the surrogate.
pub(crate) fn first_unpaired_surrogate(text: &[u8]) -> Option<(usize, u16)> {
    let mut found = escapes(text).peekable();
    while let Some(escape) = found.next() {
        match escape.unit {
            0xD800..=0xDBFF
                if found.peek().is_some_and(|low| {
                    low.at == escape.end && (0xDC00..=0xDFFF).contains(&low.unit)
                }) =>
            {
                found.next();
            }
            0xD800..=0xDFFF => return Some((escape.at, escape.unit)),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn unpaired_surrogates_are_found_in_whole_documents() {
        let find = |text: &str| first_unpaired_surrogate(text.as_bytes());
        assert_eq!(find(r#"{"a":"\ud83d\ude00","b":"x"}"#), None);
        assert_eq!(find(r#"{"a":"\\ud800"}"#), None); // an escaped backslash, then text
        assert_eq!(find(r#"{"a":"ok","b":"\ud800"}"#), Some((15, 0xD800)));
        assert_eq!(find(r#"["\udc00\ud800"]"#), Some((2, 0xDC00)));
        assert_eq!(find(r#"["\ud800\ud800\udc00"]"#), Some((2, 0xD800)));
    }
}
