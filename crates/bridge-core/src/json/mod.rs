//! JSON reading with exactly the semantics of JavaScript's `JSON.parse`.
//!
//! The validator never builds a JSON tree. It walks the schema and asks a
//! [`JsonCursor`] for the next piece of the document, skipping whatever the
//! schema leaves open. [`TextCursor`] reads JSON text; other sources (for
//! example an already parsed JavaScript value, in the N-API binding) implement
//! the same trait so that one validator serves them all.
//!
//! Why not `serde_json`: `JSON.parse` accepts two things `serde_json` rejects
//! as fatal errors, and the protocol requires both (docs/protocol.md §11.2, §11.3):
//! string escapes holding unpaired UTF-16 surrogates (`"\ud800"`) and numbers
//! beyond the double range (`1e400`, which becomes `Infinity`). A rejection
//! there is not recoverable in `serde_json`, so the validator could not judge
//! such lines the way the reference does.

//!
//! Split the way JSON readers split: [`cursor`] the reading contract,
//! `text` the cursor over text, `scan` (with its SSE2 fast path in `sse2`)
//! the scalar scanners every text reader shares, `escape` string escapes,
//! `error` V8-worded syntax errors.

mod cursor;
mod error;
pub(crate) mod escape;
pub(crate) mod scan;
#[cfg(target_arch = "x86_64")]
mod sse2;
mod text;

pub use cursor::{JsonCursor, Kind};
pub use error::SyntaxError;
pub use escape::decode_string_content;
pub use text::{Hole, HoleKind, TextCursor};
