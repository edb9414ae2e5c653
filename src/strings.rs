//! Reading JavaScript strings as UTF-8 without a fresh allocation per call.

use std::cell::RefCell;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};

/// The reused per-thread buffer holds this many bytes: a string whose UTF-8
/// fits is copied in a single pass, with no allocation. Longer ones get an
/// exactly sized buffer (two passes), so a 200 MB line never costs more.
const SCRATCH_BYTES: usize = 256 * 1024;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with the UTF-8 text of a JavaScript string (unpaired surrogates
/// become U+FFFD, as in any UTF-8 conversion). Throws a `TypeError` for a
/// value that is not a string.
pub(crate) fn with_utf8<R>(env: &Env, value: &Unknown, f: impl FnOnce(&str) -> R) -> Result<R> {
    with_utf8_raw(env, value.raw(), f)
}

/// [`with_utf8`] for a raw value handle, which must be a live handle of
/// `env`'s current scope (an argument of the call in progress).
pub(crate) fn with_utf8_raw<R>(
    env: &Env,
    raw: sys::napi_value,
    f: impl FnOnce(&str) -> R,
) -> Result<R> {
    let mut f = Some(f);
    let fitted = SCRATCH.with(|scratch| -> Result<Option<R>> {
        let mut buffer = scratch.borrow_mut();
        if buffer.len() < SCRATCH_BYTES {
            buffer.resize(SCRATCH_BYTES, 0);
        }
        let written = copy_utf8(env, raw, &mut buffer)?;
        // Room to spare means nothing was cut off.
        if written.len() + 4 < SCRATCH_BYTES {
            return Ok(f.take().map(|f| f(written)));
        }
        Ok(None)
    })?;
    if let Some(result) = fitted {
        return Ok(result);
    }
    let mut length = 0usize;
    check_status!(
        // SAFETY: `raw` is a live handle of `env`'s current scope (the
        // callers pass arguments of the call in progress); a null buffer
        // asks for the length only.
        unsafe {
            sys::napi_get_value_string_utf8(env.raw(), raw, std::ptr::null_mut(), 0, &mut length)
        },
        "Reading a string length failed"
    )?;
    let mut buffer = vec![0u8; length + 1];
    let text = copy_utf8(env, raw, &mut buffer)?;
    let f = f.take().expect("not called yet");
    Ok(f(text))
}

fn copy_utf8<'b>(env: &Env, raw: sys::napi_value, buffer: &'b mut [u8]) -> Result<&'b str> {
    let mut written = 0usize;
    // SAFETY: `raw` is a live handle of `env`'s current scope; V8 writes at
    // most `buffer.len()` bytes into `buffer`.
    let status = unsafe {
        sys::napi_get_value_string_utf8(
            env.raw(),
            raw,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut written,
        )
    };
    if status == sys::Status::napi_string_expected {
        return Err(Error::new(Status::StringExpected, "Expected a string."));
    }
    check_status!(status, "Reading a string failed")?;
    let written = &buffer[..written];
    // V8 writes well-formed UTF-8 (unpaired surrogates are replaced), so
    // checking it again is only worth it in debug builds.
    debug_assert!(std::str::from_utf8(written).is_ok());
    // SAFETY: see above.
    Ok(unsafe { std::str::from_utf8_unchecked(written) })
}
