//! Framing and judging a stream's chunks synchronously, on the JavaScript
//! thread, for `wireBridgeProcess`: the reference delivers a line's
//! callbacks inside the stream's `data` handling (after a fake child's
//! `stdout.write(line)` returns, they have run, and an exception thrown by
//! `onEvent` propagates out of the write), and applications' own tests rely
//! on it. `spawnBridgeProcess`, which owns OS pipes, keeps its reader thread.
//!
//! The parts are those of the batch contract (`bridge_core::batch`), without
//! lifting: a large event is parsed whole (BENCHMARKS.md measures the stall).

use bridge_core::batch::{prepare, PreparedBatch};
use bridge_core::reader::{Batch, LineDecoder as CoreDecoder, ReaderOptions};
use napi::bindgen_prelude::*;
use napi::{check_status, sys};
use napi_derive::napi;

use crate::external::LineText;
use crate::stream::{reader_settings, DecodeErrorValue, Parts};

/// Frames and judges a stream's chunks on the calling thread.
#[napi(js_name = "LineDecoder")]
pub struct JsLineDecoder {
    decoder: CoreDecoder,
}

#[napi]
impl JsLineDecoder {
    /// `kind` is `"events"` (stdout: every line judged) or `"text"` (stderr).
    #[napi(
        constructor,
        ts_args_type = "kind: 'events' | 'text', maxLineBytes: number"
    )]
    pub fn new(kind: String, max_line_bytes: f64) -> Result<Self> {
        let (kind, max_line_bytes) = reader_settings(&kind, max_line_bytes)?;
        Ok(JsLineDecoder {
            decoder: CoreDecoder::new(ReaderOptions {
                max_line_bytes,
                ..ReaderOptions::new(kind)
            }),
        })
    }

    /// Frames and judges a chunk: the parts of the lines it completed, or
    /// `null` when it completed none.
    #[napi(
        catch_unwind,
        ts_return_type = "{ kinds: string, parts: string[], errors: (Error | null)[] | null } | null"
    )]
    pub fn push(&mut self, chunk: Buffer) -> Option<Decoded> {
        let mut items = Vec::new();
        self.decoder.push(&chunk, |item| items.push(item));
        Decoded::of(items)
    }

    /// Ends the stream: the parts of its unterminated fragment, if any.
    #[napi(
        catch_unwind,
        ts_return_type = "{ kinds: string, parts: string[], errors: (Error | null)[] | null } | null"
    )]
    pub fn end(&mut self) -> Option<Decoded> {
        Decoded::of(self.decoder.finish().into_iter().collect())
    }
}

/// The parts of some lines, becoming `{ kinds, parts, errors }`.
pub struct Decoded(PreparedBatch);

impl Decoded {
    fn of(items: Vec<bridge_core::reader::Item>) -> Option<Decoded> {
        (!items.is_empty()).then(|| Decoded(prepare(Batch { items, end: None })))
    }
}

/// `object[name] = value`.
///
/// # Safety
/// `env` is the live environment of the call in progress, and `object` and
/// `value` are live handles of its scope.
unsafe fn set_property(
    env: sys::napi_env,
    object: sys::napi_value,
    name: &std::ffi::CStr,
    value: sys::napi_value,
) -> Result<()> {
    // SAFETY: the caller's contract; `name` is NUL-terminated by its type.
    check_status!(unsafe { sys::napi_set_named_property(env, object, name.as_ptr(), value) })
}

impl ToNapiValue for Decoded {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let PreparedBatch {
            kinds,
            parts,
            errors,
            ..
        } = value.0;
        let parts = Parts(parts.into_iter().map(LineText::prepare).collect());
        let errors: Option<Vec<Option<DecodeErrorValue>>> = (!errors.is_empty()).then(|| {
            errors
                .into_iter()
                .map(|e| e.map(DecodeErrorValue))
                .collect()
        });
        let mut object = std::ptr::null_mut();
        // SAFETY: napi-rs calls this with the live environment of the call
        // in progress; `object` is a local out-pointer.
        check_status!(unsafe { sys::napi_create_object(env, &mut object) })?;
        // SAFETY: the values are converted in `env`, and `object` is a live
        // handle of this scope.
        unsafe {
            set_property(env, object, c"kinds", String::to_napi_value(env, kinds)?)?;
            set_property(env, object, c"parts", Parts::to_napi_value(env, parts)?)?;
            let errors = Option::<Vec<Option<DecodeErrorValue>>>::to_napi_value(env, errors)?;
            set_property(env, object, c"errors", errors)?;
        }
        Ok(object)
    }
}
