//! Protocol version acceptance on events (docs/protocol.md §3.3).

/// The protocol version the host writes on every command.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The major version the host accepts on events.
pub const PROTOCOL_MAJOR: u32 = 1;

/// Whether an event's `protocol_version` is accepted: the part before the
/// first `.`, converted with JavaScript `Number()` semantics, equals 1.
pub fn is_supported_protocol_version(value: &str) -> bool {
    // What every agentlane 1.x backend writes; the rules below agree.
    if value == PROTOCOL_VERSION {
        return true;
    }
    let major = value.split('.').next().unwrap_or("");
    let major = major.trim_matches(is_js_whitespace);
    if let Some(digits) = major
        .strip_prefix("0x")
        .or_else(|| major.strip_prefix("0X"))
        .map(|d| (d, 16))
        .or_else(|| {
            major
                .strip_prefix("0o")
                .or_else(|| major.strip_prefix("0O"))
                .map(|d| (d, 8))
        })
        .or_else(|| {
            major
                .strip_prefix("0b")
                .or_else(|| major.strip_prefix("0B"))
                .map(|d| (d, 2))
        })
    {
        let (digits, radix) = digits;
        // Non-decimal literals: unsigned digits of the radix, value exactly 1.
        return !digits.is_empty()
            && digits.chars().all(|c| c.is_digit(radix))
            && digits.trim_start_matches('0') == "1";
    }
    // Decimal literal without a fraction (the major part has no `.`):
    // optional sign, digits, optional exponent. Rust's float parser accepts
    // a superset (`inf`, `nan`), none of which can equal 1.
    let is_decimal = {
        let unsigned = major.strip_prefix(['+', '-']).unwrap_or(major);
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
            None => (unsigned, None),
        };
        let exponent_ok = exponent.is_none_or(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
        });
        !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()) && exponent_ok
    };
    is_decimal && major.parse::<f64>() == Ok(1.0)
}

/// JavaScript's `WhiteSpace` and `LineTerminator` characters, which
/// `Number()` trims.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{A}' | '\u{B}' | '\u{C}' | '\u{D}' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::is_supported_protocol_version as ok;

    #[test]
    fn accepts_the_spec_examples() {
        for v in [
            "1.0",
            "1",
            "1.7",
            "1.0.3",
            "01.0",
            " 1.0",
            "+1.2",
            "1e0",
            "0x1.0",
            "10e-1",
            "\u{feff}1",
            "1\u{2028}.5",
            "0b1",
            "0o01",
        ] {
            assert!(ok(v), "{v:?} should be accepted");
        }
    }

    #[test]
    fn rejects_the_spec_examples() {
        for v in [
            "2.0", "0.9", "", "v1", "1abc", ".1", "-1", "-0x1", "0x", "1_0", "inf", "Infinity",
            "1e", "0x2", "1 1", "\u{85}1",
        ] {
            assert!(!ok(v), "{v:?} should be rejected");
        }
    }
}
