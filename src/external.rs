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

use napi::{check_status, sys, Result};

/// Lines at least this long are prepared as external strings.
pub(crate) const EXTERNAL_FROM_BYTES: usize = 64 * 1024;

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
    /// Prepares a line; runs on the reader thread.
    pub(crate) fn prepare(line: String) -> LineText {
        if line.len() < EXTERNAL_FROM_BYTES || functions().is_none() {
            LineText::Utf8(line)
        } else if line.is_ascii() {
            LineText::Latin1(line.into_bytes())
        } else {
            LineText::Utf16(line.encode_utf16().collect())
        }
    }

    /// Creates the JavaScript string; runs on the JavaScript thread.
    pub(crate) fn into_js(self, env: sys::napi_env) -> Result<sys::napi_value> {
        let mut value = std::ptr::null_mut();
        match (self, functions()) {
            (LineText::Latin1(bytes), Some(f)) => {
                unsafe { external(env, bytes, f.latin1, &mut value) }?
            }
            (LineText::Utf16(units), Some(f)) => {
                unsafe { external(env, units, f.utf16, &mut value) }?
            }
            (LineText::Utf8(text), _) => check_status!(unsafe {
                sys::napi_create_string_utf8(
                    env,
                    text.as_ptr().cast(),
                    text.len() as isize,
                    &mut value,
                )
            })?,
            (LineText::Latin1(bytes), None) => check_status!(unsafe {
                sys::napi_create_string_latin1(
                    env,
                    bytes.as_ptr().cast(),
                    bytes.len() as isize,
                    &mut value,
                )
            })?,
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
            // SAFETY: these are the Node-API signatures of both functions.
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
unsafe fn external<T, C>(
    env: sys::napi_env,
    data: Vec<T>,
    create: CreateExternal<C>,
    value: &mut sys::napi_value,
) -> Result<()> {
    unsafe extern "C" fn release<T>(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
        drop(unsafe { Box::from_raw(hint.cast::<Vec<T>>()) });
    }
    let length = data.len() as isize;
    let owner = Box::into_raw(Box::new(data));
    let pointer = unsafe { (*owner).as_mut_ptr() }.cast::<C>();
    let mut copied = false;
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
        // Not taken: the finalizer will not run.
        drop(unsafe { Box::from_raw(owner) });
    }
    check_status!(status)
}
