//! N-API binding of `bridge-core`.
//!
//! Only conversions live here: JavaScript strings in, core results out, and
//! core errors turned into instances of the TypeScript layer's
//! `BridgeDecodeError` class (registered once at load). Every export catches
//! panics (`catch_unwind`), so no Rust panic can abort the host process.

#![deny(clippy::all)]

mod external;
mod stream;
mod strings;
mod value_cursor;

use std::cell::RefCell;

use bridge_core::command::check_command_frame;
use bridge_core::schema::{COMMAND_TYPES, EVENT_TYPES, MODEL_KINDS, NATIVE_KINDS};
use bridge_core::{DecodeError, PROTOCOL_MAJOR, PROTOCOL_VERSION};
use napi::bindgen_prelude::*;
use napi::{check_status, sys, JsValue};
use napi_derive::napi;

/// `new BridgeDecodeError(message, fields)`.
type DecodeErrorClass = FunctionRef<FnArgs<(String, Vec<String>)>, Unknown<'static>>;

thread_local! {
    // One per JavaScript thread (each worker loads the addon anew).
    static DECODE_ERROR_CLASS: RefCell<Option<DecodeErrorClass>> = const { RefCell::new(None) };
}

/// Registers the class that decode errors are created as. The TypeScript
/// layer calls this once when it loads, before any decoding.
#[napi(catch_unwind)]
pub fn register_decode_error_class(
    error_class: Function<FnArgs<(String, Vec<String>)>, Unknown>,
) -> Result<()> {
    let reference = error_class.create_ref()?;
    // SAFETY of the lifetime: the reference is only borrowed back on this thread.
    let reference: DecodeErrorClass = unsafe { std::mem::transmute(reference) };
    DECODE_ERROR_CLASS.with(|slot| *slot.borrow_mut() = Some(reference));
    Ok(())
}

/// Creates a `BridgeDecodeError` instance for a core decode error (a plain
/// `Error` if the class was never registered, e.g. when the raw binding is
/// used directly).
pub(crate) fn decode_error_instance(env: &Env, error: &DecodeError) -> Result<sys::napi_value> {
    let registered = DECODE_ERROR_CLASS.with(|slot| -> Result<Option<sys::napi_value>> {
        let slot = slot.borrow();
        let Some(class) = slot.as_ref() else {
            return Ok(None);
        };
        let instance = class
            .borrow_back(env)?
            .new_instance(FnArgs::from((error.message.clone(), error.fields.clone())))?;
        Ok(Some(instance.raw()))
    })?;
    match registered {
        Some(instance) => Ok(instance),
        None => {
            let plain =
                env.create_error(Error::new(Status::GenericFailure, error.message.clone()))?;
            Ok(plain.raw())
        }
    }
}

/// Turns a core decode error into a thrown `BridgeDecodeError` instance.
pub(crate) fn throwable(env: &Env, error: DecodeError) -> Error {
    match decode_error_instance(env, &error) {
        Ok(instance) => Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), instance) }),
        Err(_) => Error::new(Status::GenericFailure, error.message),
    }
}

/// Installs `validateEventLine(line: string): number` as a plain Node-API
/// callback. It is the hottest entry point (once per decoded line), and the
/// generic `#[napi]` wrapper costs about as much as validating a small event
/// (measured: 140 ns per call against 60 ns for the plain callback).
#[napi(module_exports)]
pub fn install_raw_exports(exports: Object, env: Env) -> Result<()> {
    let name = "validateEventLine";
    let mut function = std::ptr::null_mut();
    check_status!(unsafe {
        sys::napi_create_function(
            env.raw(),
            name.as_ptr().cast(),
            name.len() as isize,
            Some(validate_event_line_callback),
            std::ptr::null_mut(),
            &mut function,
        )
    })?;
    check_status!(unsafe {
        sys::napi_set_named_property(
            env.raw(),
            exports.raw(),
            c"validateEventLine".as_ptr(),
            function,
        )
    })?;
    Ok(())
}

/// Validates one event line. Returns the index of its type in
/// `KNOWN_EVENT_TYPES`; throws a `BridgeDecodeError` otherwise. The caller
/// parses the line with `JSON.parse`, which yields exactly the judged value.
unsafe extern "C" fn validate_event_line_callback(
    raw_env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let env = Env::from_raw(raw_env);
    let outcome = std::panic::catch_unwind(|| -> Result<u32> {
        let mut argc = 1usize;
        let mut argv = [std::ptr::null_mut(); 1];
        check_status!(unsafe {
            sys::napi_get_cb_info(
                raw_env,
                info,
                &mut argc,
                argv.as_mut_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        })?;
        let checked = strings::with_utf8_raw(&env, argv[0], bridge_core::validate_event_line)?;
        checked.map(|t| t as u32).map_err(|e| throwable(&env, e))
    })
    .map_err(napi::bindgen_prelude::panic_to_error)
    .and_then(|r| r);
    let mut result = std::ptr::null_mut();
    match outcome {
        Ok(index) => {
            unsafe { sys::napi_create_uint32(raw_env, index, &mut result) };
        }
        Err(error) => unsafe { napi::JsError::from(error).throw_into(raw_env) },
    }
    result
}

/// Validates a value that `JSON.parse` produced from an event line, by
/// walking only the members the schema checks. Same result as
/// `validateEventLine` on the line; cheaper for large lines, whose text is
/// costly to copy out of V8.
#[napi(catch_unwind, ts_args_type = "value: unknown")]
pub fn validate_event_value(env: Env, value: Unknown) -> Result<u32> {
    let mut cursor = value_cursor::ValueCursor::new(env.raw(), value.raw());
    match bridge_core::validate_event(&mut cursor)? {
        Ok(event_type) => Ok(event_type as u32),
        Err(error) => Err(throwable(&env, error)),
    }
}

/// Checks a command frame encoded by `JSON.stringify` (without newline).
/// Returns why the backend would mishandle it, or `null` when it is safe to
/// send; the TypeScript layer throws the `TypeError`.
#[napi(catch_unwind, ts_args_type = "frame: string")]
pub fn command_frame_problem(env: Env, frame: Unknown) -> Result<Option<String>> {
    let outcome = strings::with_utf8(&env, &frame, check_command_frame)?;
    Ok(outcome.err().map(|e| e.message))
}

/// §3.3: whether an event's `protocol_version` is accepted.
#[napi(catch_unwind)]
pub fn is_supported_protocol_version(value: String) -> bool {
    bridge_core::is_supported_protocol_version(&value)
}

/// The protocol's names and constants, from the core's schema table, so that
/// the TypeScript layer does not keep a second copy.
#[napi(object)]
pub struct ProtocolTables {
    pub protocol_version: String,
    pub protocol_major: u32,
    pub event_types: Vec<String>,
    pub command_types: Vec<String>,
    pub native_kinds: Vec<String>,
    pub model_kinds: Vec<String>,
}

#[napi(catch_unwind)]
pub fn protocol_tables() -> ProtocolTables {
    let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
    ProtocolTables {
        protocol_version: PROTOCOL_VERSION.to_owned(),
        protocol_major: PROTOCOL_MAJOR,
        event_types: owned(&EVENT_TYPES),
        command_types: owned(&COMMAND_TYPES),
        native_kinds: owned(&NATIVE_KINDS),
        model_kinds: owned(&MODEL_KINDS),
    }
}
