//! Large lines become JavaScript strings without a copy on the JavaScript
//! thread: V8 "external" strings over memory prepared on the reader thread.
//!
//! Creating a 10 MB string by copying costs the JavaScript thread a few
//! milliseconds, a sizeable share of `JSON.parse` on that line. An ASCII
//! line's UTF-8 bytes are its Latin-1 bytes, so V8 can use them as they are;
//! other large lines are transcoded to UTF-16 on the reader thread. The
//! Node-API functions for this (`node_api_create_external_string_*`) exist
//! from Node 20.4 on; they are looked up at run time, and without them lines
//! are copied as usual.

use std::ffi::c_void;
use std::sync::OnceLock;

use bridge_core::batch::PartText;
use bridge_core::reader::LARGE_LINE_BYTES;
use napi::{check_status, sys, Result};

/// A line ready to become a JavaScript string.
pub(crate) enum LineText {
    /// Copied by V8 (small lines, or when external strings are unavailable).
    Utf8(String),
    /// Latin-1 text (a large ASCII line, or a lifted string), handed to V8
    /// without copying.
    Latin1(Vec<u8>),
    /// UTF-16 text (a large non-ASCII line transcoded off the JavaScript
    /// thread, or a lifted string), handed to V8 without copying.
    Utf16(Vec<u16>),
}

impl LineText {
    /// Prepares a part's text; runs on the reader thread. Large lines
    /// (the core's [`LARGE_LINE_BYTES`]) become external strings.
    pub(crate) fn prepare(part: PartText) -> LineText {
        match part {
            PartText::Latin1(bytes) => LineText::Latin1(bytes),
            PartText::Utf16(units) => LineText::Utf16(units),
            PartText::Utf8(line) if line.len() < LARGE_LINE_BYTES || functions().is_none() => {
                LineText::Utf8(line)
            }
            PartText::Utf8(line) if line.is_ascii() => LineText::Latin1(line.into_bytes()),
            PartText::Utf8(line) => LineText::Utf16(line.encode_utf16().collect()),
        }
    }

    /// Creates the JavaScript string; runs on the JavaScript thread, with
    /// `env` the environment of the call in progress.
    pub(crate) fn into_js(self, env: sys::napi_env) -> Result<sys::napi_value> {
        let mut value = std::ptr::null_mut();
        match (self, functions()) {
            (LineText::Latin1(bytes), Some(f)) => {
                // SAFETY: `env` is the live environment of the current call
                // (see `into_js`), and `latin1` has the Node-API signature.
                unsafe { external(env, bytes, f.latin1, &mut value) }?
            }
            (LineText::Utf16(units), Some(f)) => {
                // SAFETY: as above, for the UTF-16 variant.
                unsafe { external(env, units, f.utf16, &mut value) }?
            }
            // SAFETY: a live environment, a pointer and length that describe
            // live memory V8 copies before the call returns, and a local
            // out-pointer (the same for the next two arms).
            (LineText::Utf8(text), _) => check_status!(unsafe {
                sys::napi_create_string_utf8(
                    env,
                    text.as_ptr().cast(),
                    text.len() as isize,
                    &mut value,
                )
            })?,
            // SAFETY: see above.
            (LineText::Latin1(bytes), None) => check_status!(unsafe {
                sys::napi_create_string_latin1(
                    env,
                    bytes.as_ptr().cast(),
                    bytes.len() as isize,
                    &mut value,
                )
            })?,
            // SAFETY: see above.
            (LineText::Utf16(units), None) => check_status!(unsafe {
                sys::napi_create_string_utf16(env, units.as_ptr(), units.len() as isize, &mut value)
            })?,
        }
        Ok(value)
    }
}

type CreateExternal<T> = unsafe extern "C" fn(
    env: sys::napi_env,
    data: *mut T,
    length: isize,
    finalize: sys::napi_finalize,
    hint: *mut c_void,
    result: *mut sys::napi_value,
    copied: *mut bool,
) -> sys::napi_status;

struct ExternalStringFunctions {
    latin1: CreateExternal<std::ffi::c_char>,
    utf16: CreateExternal<u16>,
}

fn functions() -> Option<&'static ExternalStringFunctions> {
    static FUNCTIONS: OnceLock<Option<ExternalStringFunctions>> = OnceLock::new();
    FUNCTIONS
        .get_or_init(|| {
            #[cfg(unix)]
            let host = libloading::os::unix::Library::this();
            #[cfg(windows)]
            let host = libloading::os::windows::Library::this().ok()?;
            // SAFETY: these are the Node-API signatures of both functions,
            // and the host process (which exports them) outlives the addon.
            unsafe {
                let latin1 = *host
                    .get::<CreateExternal<std::ffi::c_char>>(
                        b"node_api_create_external_string_latin1\0",
                    )
                    .ok()?;
                let utf16 = *host
                    .get::<CreateExternal<u16>>(b"node_api_create_external_string_utf16\0")
                    .ok()?;
                Some(ExternalStringFunctions { latin1, utf16 })
            }
        })
        .as_ref()
}

/// Gives `data` to V8 as an external string; V8 calls `release` when the
/// string is collected (or at once when it chose to copy).
///
/// # Safety
/// `env` must be the live environment of the current call, and `create` a
/// Node-API external string constructor for elements of type `C`, whose
/// layout `T` has (`u8`/`c_char`, or `u16`).
unsafe fn external<T, C>(
    env: sys::napi_env,
    data: Vec<T>,
    create: CreateExternal<C>,
    value: &mut sys::napi_value,
) -> Result<()> {
    unsafe extern "C" fn release<T>(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
        // SAFETY: `hint` is the `Box<Vec<T>>` leaked below, passed back
        // exactly once by V8 when it is done with the string.
        drop(unsafe { Box::from_raw(hint.cast::<Vec<T>>()) });
    }
    let length = data.len() as isize;
    let owner = Box::into_raw(Box::new(data));
    // SAFETY: `owner` was just made from a live box.
    let pointer = unsafe { (*owner).as_mut_ptr() }.cast::<C>();
    let mut copied = false;
    // SAFETY: the caller's contract; `pointer` and `length` describe the
    // vector `owner` keeps alive until `release` frees it.
    let status = unsafe {
        create(
            env,
            pointer,
            length,
            Some(release::<T>),
            owner.cast(),
            value,
            &mut copied,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: not taken, so the finalizer will not run and the box is
        // still ours.
        drop(unsafe { Box::from_raw(owner) });
    }
    check_status!(status)
}
