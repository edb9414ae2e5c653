//! Reading JavaScript strings as UTF-8 without a fresh allocation per call.

use std::cell::RefCell;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};

/// Strings up to this many UTF-16 code units are copied into a reused
/// per-thread buffer sized by the worst case (3 UTF-8 bytes per unit), in a
/// single pass. Longer ones get an exactly sized buffer (two passes), so a
/// 200 MB line never costs a 600 MB buffer.
const REUSE_LIMIT: usize = 64 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with the UTF-8 text of a JavaScript string (unpaired surrogates
/// become U+FFFD, as in any UTF-8 conversion). Throws a `TypeError` for a
/// value that is not a string.
pub(crate) fn with_utf8<R>(env: &Env, value: &Unknown, f: impl FnOnce(&str) -> R) -> Result<R> {
    let raw = value.raw();
    let mut units = 0usize;
    let status = unsafe { sys::napi_get_value_string_utf16(env.raw(), raw, std::ptr::null_mut(), 0, &mut units) };
    if status == sys::Status::napi_string_expected {
        return Err(Error::new(Status::StringExpected, "Expected a string."));
    }
    check_status!(status, "Reading a string length failed")?;

    if units <= REUSE_LIMIT {
        SCRATCH.with(|scratch| {
            let mut buffer = scratch.borrow_mut();
            let needed = units * 3 + 1;
            if buffer.len() < needed {
                buffer.resize(needed, 0);
            }
            let text = copy_utf8(env, raw, &mut buffer[..needed])?;
            Ok(f(text))
        })
    } else {
        let mut length = 0usize;
        check_status!(
            unsafe { sys::napi_get_value_string_utf8(env.raw(), raw, std::ptr::null_mut(), 0, &mut length) },
            "Reading a string length failed"
        )?;
        let mut buffer = vec![0u8; length + 1];
        let text = copy_utf8(env, raw, &mut buffer)?;
        Ok(f(text))
    }
}

fn copy_utf8<'b>(env: &Env, raw: sys::napi_value, buffer: &'b mut [u8]) -> Result<&'b str> {
    let mut written = 0usize;
    check_status!(
        unsafe {
            sys::napi_get_value_string_utf8(env.raw(), raw, buffer.as_mut_ptr().cast(), buffer.len(), &mut written)
        },
        "Reading a string failed"
    )?;
    // V8 writes well-formed UTF-8 (unpaired surrogates are replaced).
    std::str::from_utf8(&buffer[..written]).map_err(|e| Error::new(Status::GenericFailure, e.to_string()))
}
