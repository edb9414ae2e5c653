//! How JavaScript shows a value in a snapshot refusal, so that the check in
//! Rust words its messages exactly as `checkSnapshot` (lib/store/snapshot.ts)
//! does: `String(number)`, `JSON.stringify(string)` (UTF-16 lengths, lone
//! surrogates escaped), and the date-time test of `created_at`.

/// A value as the check saw it: enough to judge it and to describe it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Val {
    /// The member is absent (`undefined` in JavaScript).
    Missing,
    Null,
    Bool(bool),
    /// The number as `JSON.parse` converts it.
    Number(f64),
    /// A string: the byte range of its content (without quotes) in the text.
    Str(usize, usize),
    Array,
    Object,
}

impl Val {
    /// `describe(value)` of lib/store/snapshot.ts.
    pub(crate) fn describe(&self, text: &str) -> String {
        match *self {
            Val::Missing => "undefined".into(),
            Val::Null => "null".into(),
            Val::Bool(value) => value.to_string(),
            Val::Number(value) => js_number(value),
            Val::Str(start, end) => describe_units(&string_units(&text[start..end])),
            Val::Array => "an array".into(),
            Val::Object => "an object".into(),
        }
    }

    /// Whether it is a number `Number.isSafeInteger` takes.
    pub(crate) fn safe_integer(&self) -> Option<f64> {
        match *self {
            Val::Number(value)
                if value.is_finite() && value.fract() == 0.0 && value.abs() <= MAX_SAFE =>
            {
                Some(value)
            }
            _ => None,
        }
    }
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// `describe` of a string known here (an expected agent's name).
pub(crate) fn describe_str(value: &str) -> String {
    describe_units(&value.encode_utf16().collect::<Vec<u16>>())
}

/// A string longer than 40 UTF-16 units is "a string"; a shorter one is
/// shown as `JSON.stringify` writes it.
fn describe_units(units: &[u16]) -> String {
    if units.len() > 40 {
        return "a string".into();
    }
    let mut out = String::from("\"");
    for unit in char::decode_utf16(units.iter().copied()) {
        match unit {
            Ok('"') => out.push_str("\\\""),
            Ok('\\') => out.push_str("\\\\"),
            Ok('\u{8}') => out.push_str("\\b"),
            Ok('\u{c}') => out.push_str("\\f"),
            Ok('\n') => out.push_str("\\n"),
            Ok('\r') => out.push_str("\\r"),
            Ok('\t') => out.push_str("\\t"),
            Ok(c) if (c as u32) < 0x20 => unit_escape(&mut out, c as u16),
            Ok(c) => out.push(c),
            Err(lone) => unit_escape(&mut out, lone.unpaired_surrogate()),
        }
    }
    out.push('"');
    out
}

/// `\uXXXX` with lowercase hex, as `JSON.stringify` writes a control
/// character or a lone surrogate.
fn unit_escape(out: &mut String, unit: u16) {
    use std::fmt::Write;
    let _ = write!(out, "\\u{unit:04x}");
}

/// The UTF-16 units `JSON.parse` makes of a string's content (escapes
/// decoded, lone surrogates kept).
fn string_units(raw: &str) -> Vec<u16> {
    let mut units = Vec::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buffer = [0u16; 2];
            units.extend_from_slice(c.encode_utf16(&mut buffer));
            continue;
        }
        let unit = match chars.next() {
            Some('b') => 0x8,
            Some('f') => 0xc,
            Some('n') => 0xa,
            Some('r') => 0xd,
            Some('t') => 0x9,
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                u16::from_str_radix(&hex, 16).unwrap_or(0xfffd)
            }
            Some(other) => other as u16,
            None => break,
        };
        units.push(unit);
    }
    units
}

/// `String(value)` for a number (ECMAScript's Number::toString).
pub(crate) fn js_number(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if value == 0.0 {
        return "0".into();
    }
    // Rust's shortest round-trip digits, as `d.ddde±x`.
    let formatted = format!("{:e}", value.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exponent.parse::<i32>().unwrap_or(0) + 1;
    let sign = if value < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { "-" } else { "+" };
        if k == 1 {
            format!("{digits}e{e_sign}{}", e.abs())
        } else {
            format!("{}.{}e{e_sign}{}", &digits[..1], &digits[1..], e.abs())
        }
    };
    format!("{sign}{body}")
}

/// Whether `text` is an aware ISO 8601 date-time as `checkSnapshot`'s
/// `DATE_TIME` and its range checks take one (the day checked against the
/// month as `Date.UTC` counts it: years 0–99 are 1900–1999 there).
pub(crate) fn is_date_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |at: usize, count: usize| -> Option<u32> {
        let part = b.get(at..at + count)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let (Some(year), Some(month), Some(day)) = (digits(0, 4), digits(5, 2), digits(8, 2)) else {
        return false;
    };
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return false;
    }
    let (Some(hour), Some(minute)) = (digits(11, 2), digits(14, 2)) else {
        return false;
    };
    if b.get(13) != Some(&b':') {
        return false;
    }
    let mut at = 16;
    let mut second = 0;
    if b.get(at) == Some(&b':') {
        let Some(s) = digits(at + 1, 2) else {
            return false;
        };
        second = s;
        at += 3;
        if matches!(b.get(at), Some(b'.' | b',')) {
            let fraction = b[at + 1..]
                .iter()
                .take_while(|d| d.is_ascii_digit())
                .count();
            if fraction == 0 {
                return false;
            }
            at += 1 + fraction;
        }
    }
    let (offset_hours, offset_minutes) = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => (0, 0),
        Some(b'+' | b'-') => {
            let Some(hours) = digits(at + 1, 2) else {
                return false;
            };
            let rest = &b[at + 3..];
            let minutes = match rest {
                [] => 0,
                [_, _] => digits(at + 3, 2).unwrap_or(99),
                [b':', _, _] => digits(at + 4, 2).unwrap_or(99),
                _ => return false,
            };
            (hours, minutes)
        }
        _ => return false,
    };
    (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(if year <= 99 { year + 1900 } else { year }, month)
        && hour <= 23
        && minute <= 59
        && second <= 59
        && offset_hours <= 23
        && offset_minutes <= 59
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_javascript_writes_them() {
        let cases = [
            (1.0, "1"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (9007199254740993.0, "9007199254740992"),
            (f64::INFINITY, "Infinity"),
            (-0.0, "0"),
        ];
        for (value, text) in cases {
            assert_eq!(js_number(value), text, "{value}");
        }
    }

    #[test]
    fn strings_as_json_stringify_writes_them() {
        let text = r#"a\"b\\c\n\u0001\ud800é🌍"#;
        assert_eq!(
            Val::Str(0, text.len()).describe(text),
            r#""a\"b\\c\n\u0001\ud800é🌍""#
        );
        let long = "x".repeat(41);
        assert_eq!(Val::Str(0, 41).describe(&long), "a string");
        // 20 emoji are 40 UTF-16 units: still shown.
        assert_eq!(describe_str(&"🌍".repeat(20)).chars().count(), 22);
        assert_eq!(describe_str(&"🌍".repeat(21)), "a string");
    }

    #[test]
    fn date_times() {
        for ok in [
            "2026-01-01T00:00:00Z",
            "2026-01-01t00:00z",
            "2026-01-01 00:00:00.123+02:00",
            "2024-02-29T10:00:00,5-0530",
            "2026-12-31T23:59:59+23",
        ] {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2026-01-01T00:00:00",
            "2026-01-01",
            "2026-02-30T10:00:00Z",
            "2025-02-29T10:00:00Z",
            "0000-02-29T10:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+2400",
            "2026-01-01T00:00:00Zx",
            "yesterday",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }
}
