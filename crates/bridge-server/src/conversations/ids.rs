//! The bridge's ids, in one place: a conversation's (`default`, or `c1`,
//! `c2`, … never reused), and the bridge-wide id of something a backend
//! numbers on its own, such as an approval's `request_id`:
//! `<conversation id>/<backend's id>` (`c3/tool-approval-1`). Each backend
//! counts its approvals from 1, so their own ids repeat across
//! conversations; the bridge-wide one names exactly one in the whole
//! bridge, and says which conversation it belongs to. Tool calls the
//! bridge hands out later get theirs the same way.

/// The id of the conversation the bridge starts with (the one a request
/// without `conversation_id` addresses).
pub const DEFAULT_ID: &str = "default";

/// The id of the `n`-th created conversation.
pub fn conversation_id(n: u64) -> String {
    format!("c{n}")
}

/// Whether `id` has the form of a conversation id of this bridge.
fn is_conversation_id(id: &str) -> bool {
    id == DEFAULT_ID
        || id
            .strip_prefix('c')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The bridge-wide id of a backend's `id` in `conversation`.
pub fn bridge_wide(conversation: &str, id: &str) -> String {
    format!("{conversation}/{id}")
}

/// A bridge-wide id's conversation and backend id; `None` for an id of
/// another form (a backend's own, as old clients send it).
pub fn split_bridge_wide(id: &str) -> Option<(&str, &str)> {
    let (conversation, own) = id.split_once('/')?;
    (is_conversation_id(conversation) && !own.is_empty()).then_some((conversation, own))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_wide_id_splits_back_and_a_backend_id_is_not_one() {
        for (conversation, own) in [("c3", "tool-approval-1"), ("default", "a/b"), ("c12", "x")] {
            assert_eq!(
                split_bridge_wide(&bridge_wide(conversation, own)),
                Some((conversation, own))
            );
        }
        for id in ["tool-approval-1", "c/x", "cx/1", "c1/", "/x", "other/x", ""] {
            assert_eq!(split_bridge_wide(id), None, "{id}");
        }
        assert_eq!(conversation_id(7), "c7");
    }
}
