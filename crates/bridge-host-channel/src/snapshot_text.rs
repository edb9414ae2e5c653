//! A checked snapshot's text as stores keep it: its `revision` member
//! first, so that a store reads a stored revision from the text's first
//! bytes (lib/store/snapshot.ts `leadingRevision`) without parsing the
//! conversation; otherwise the backend's text, byte for byte.

use std::borrow::Cow;

/// The text with its `revision` members cut out and the revision written
/// first (`{"revision":N,…}`); the text itself when it already starts so.
/// `open`/`close` are the offsets of the document's braces; each member
/// range runs from the end of the value before it (its comma included).
pub(crate) fn revision_first<'a>(
    text: &'a str,
    open: usize,
    close: usize,
    revision: u64,
    members: &[(usize, usize)],
) -> Cow<'a, str> {
    let lead = format!("{{\"revision\":{revision}");
    if open == 0 && members.len() == 1 && members[0].0 == 1 && text.starts_with(&lead) {
        let after = text.as_bytes().get(open + lead.len());
        if matches!(after, Some(b',' | b'}')) {
            return Cow::Borrowed(text);
        }
    }
    let mut body = String::with_capacity(close - open + 1);
    let mut from = open + 1;
    for &(start, end) in members {
        body.push_str(&text[from..start]);
        from = end;
    }
    body.push_str(&text[from..close]);
    let body = body.trim_start_matches([' ', '\t', '\n', '\r']);
    let body = body
        .strip_prefix(',')
        .unwrap_or(body)
        .trim_start_matches([' ', '\t', '\n', '\r']);
    let mut out = String::with_capacity(lead.len() + body.len() + 2);
    out.push_str(&lead);
    if !body.trim_end_matches([' ', '\t', '\n', '\r']).is_empty() {
        out.push(',');
        out.push_str(body);
    }
    out.push('}');
    Cow::Owned(out)
}

/// `revision_first` of text the caller owns, without a copy in the usual
/// case (one `revision` member, written as its digits, after the first
/// member: agentlane's order): the member is moved to the front inside the
/// buffer (a rotation of the bytes before it), so that a long conversation
/// is not copied into a fresh buffer (whose page faults alone cost a
/// third of the check at 318 KiB).
pub(crate) fn into_revision_first(
    text: String,
    open: usize,
    close: usize,
    revision: u64,
    members: &[(usize, usize)],
) -> String {
    let member = format!("\"revision\":{revision}");
    if let (0, &[(start, end)]) = (open, members) {
        let bytes = text.as_bytes();
        let canonical =
            bytes.get(start) == Some(&b',') && text.get(start + 1..end) == Some(&member);
        if start > 1 && canonical {
            let mut bytes = text.into_bytes();
            // `{` A `,` R … becomes `{` R A `,` …, then `{` R `,` A …: whole
            // blocks move (A begins after `{` and ends before `,`), so the
            // text stays UTF-8.
            let region = &mut bytes[1..end];
            region.rotate_right(member.len());
            region[member.len()..].rotate_right(1);
            return String::from_utf8(bytes)
                .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
        }
    }
    match revision_first(&text, open, close, revision, members) {
        Cow::Borrowed(_) => text,
        Cow::Owned(moved) => moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_moves_give_the_same_text() {
        for (text, members) in [
            (r#"{"a":1,"revision":2,"b":3}"#, vec![(6, 19)]),
            (r#"{"é":"ü","revision":2}"#, vec![(10, 23)]),
            (r#"{"revision":2,"a":1}"#, vec![(1, 13)]),
            (r#"{"a":1 ,"revision":2}"#, vec![(6, 20)]),
            (r#"{"a":1,"revision":2.0}"#, vec![(6, 21)]),
        ] {
            let close = text.len() - 1;
            let expected = revision_first(text, 0, close, 2, &members).into_owned();
            assert_eq!(
                into_revision_first(text.to_owned(), 0, close, 2, &members),
                expected,
                "{text}"
            );
        }
    }

    #[test]
    fn revision_members_are_cut_wherever_they_are() {
        let cut = |text: &str, members: &[(usize, usize)]| {
            revision_first(text, 0, text.len() - 1, 2, members).into_owned()
        };
        assert_eq!(
            cut(r#"{"a":1,"revision":2,"b":3}"#, &[(6, 19)]),
            r#"{"revision":2,"a":1,"b":3}"#
        );
        assert_eq!(
            cut(r#"{"revision":2.0,"a":1}"#, &[(1, 15)]),
            r#"{"revision":2,"a":1}"#
        );
        assert_eq!(
            cut(r#"{ "revision" : 2 }"#, &[(1, 16)]),
            r#"{"revision":2}"#
        );
        assert_eq!(
            cut(r#"{"revision":1,"a":1,"revision":2}"#, &[(1, 13), (19, 32)]),
            r#"{"revision":2,"a":1}"#
        );
    }
}
