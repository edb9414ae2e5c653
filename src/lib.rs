//! N-API binding of `bridge-core`.
//!
//! Only conversions live here: JavaScript strings in, core results out, and
//! core errors turned into instances of the TypeScript layer's
//! `BridgeDecodeError` class (through a factory registered once at load).
//! Every export catches panics (`catch_unwind`), so no Rust panic can abort
//! the host process.
//!
//! The unsafe code of the binding is Node-API calls through `napi::sys` on
//! the hot paths, where napi-rs's safe wrappers cost as much as the work
//! (measured: a `#[napi]` wrapper took 140 ns per call where the plain
//! callback takes 60 ns, against 22 ns of validation for a remembered
//! shape), and V8 external strings, which napi-rs does not wrap. Each block
//! says why it is sound.

#![deny(clippy::all)]

mod decoder;
mod external;
mod file_lock;
mod host_channel;
pub use host_channel::{check_snapshot_text, HostChannel};
pub use file_lock::try_lock_file;
mod launch;
pub use launch::{channel_layout, find_supervisor};
#[cfg(unix)]
mod output_socket;
#[cfg(unix)]
pub use output_socket::{close_descriptor, socket_pair};
#[cfg(unix)]
mod prefork;
#[cfg(unix)]
pub use prefork::warm_invocation;
mod stream;
mod strings;
mod teardown;
mod value_cursor;

use std::cell::RefCell;

use bridge_core::batch::PartKind;
use bridge_core::command::check_command_frame;
use bridge_core::framer::{DEFAULT_MAX_LINE_BYTES, TOO_LONG_PREFIX_BYTES};
use bridge_core::lift::MARKER_TEXT;
use bridge_core::reader::LARGE_LINE_BYTES;
use bridge_core::schema::{COMMAND_TYPES, EVENT_TYPES, MODEL_KINDS, NATIVE_KINDS};
use bridge_core::{DecodeError, DecodeErrorKind, PROTOCOL_MAJOR, PROTOCOL_VERSION};
use napi::bindgen_prelude::*;
use napi::{check_status, sys, JsValue};
use napi_derive::napi;

/// The arguments of the decode error factory: message, fields, code.
type DecodeErrorArgs = FnArgs<(String, Vec<String>, &'static str)>;
/// `(message, fields, code) => new BridgeDecodeError(message, fields, {code})`.
type DecodeErrorFactory = FunctionRef<DecodeErrorArgs, Unknown<'static>>;

thread_local! {
    // One per JavaScript thread (each worker loads the addon anew).
    static DECODE_ERROR_FACTORY: RefCell<Option<DecodeErrorFactory>> = const { RefCell::new(None) };
}

/// Registers the function that makes decode errors. The TypeScript layer
/// calls this once when it loads, before any decoding.
#[napi(
    catch_unwind,
    ts_args_type = "factory: (message: string, fields: string[], code: string) => Error"
)]
pub fn register_decode_error_factory(factory: Function<DecodeErrorArgs, Unknown>) -> Result<()> {
    let reference = factory.create_ref()?;
    // SAFETY: only the lifetime changes. The reference is stored in this
    // thread's slot and only ever borrowed back on this thread, with the
    // `Env` of the call that uses it.
    let reference: DecodeErrorFactory = unsafe { std::mem::transmute(reference) };
    DECODE_ERROR_FACTORY.with(|slot| *slot.borrow_mut() = Some(reference));
    Ok(())
}

/// Creates a `BridgeDecodeError` instance for a core decode error (a plain
/// `Error` if no factory was registered, e.g. when the raw binding is used
/// directly).
pub(crate) fn decode_error_instance(env: &Env, error: &DecodeError) -> Result<sys::napi_value> {
    let registered = DECODE_ERROR_FACTORY.with(|slot| -> Result<Option<sys::napi_value>> {
        let slot = slot.borrow();
        let Some(factory) = slot.as_ref() else {
            return Ok(None);
        };
        let instance = factory.borrow_back(env)?.call(FnArgs::from((
            error.message.clone(),
            error.fields.clone(),
            error.code(),
        )))?;
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
        // SAFETY: `instance` was just created in this `env` and is a live
        // handle of the current call's scope.
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
    // SAFETY: `env` is the module's environment during its initialisation;
    // the name pointer and length describe a live `&str`; `function` is a
    // local out-pointer.
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
    // SAFETY: `exports` and `function` are live handles of this scope; the
    // property name is a NUL-terminated literal.
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
///
/// # Safety
/// Called by Node-API only, with a live environment and callback info.
unsafe extern "C" fn validate_event_line_callback(
    raw_env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let env = Env::from_raw(raw_env);
    let outcome = std::panic::catch_unwind(|| -> Result<u32> {
        let mut argc = 1usize;
        let mut argv = [std::ptr::null_mut(); 1];
        // SAFETY: `raw_env` and `info` come from Node-API for this call;
        // `argv` has room for `argc` (1) handles.
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
            // SAFETY: a live environment of this call and a local out-pointer.
            unsafe { sys::napi_create_uint32(raw_env, index, &mut result) };
        }
        // SAFETY: throwing into the environment of this call, which returns
        // to JavaScript right after.
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

/// Why the backend would mishandle a command frame (the core's
/// `CommandError`); the TypeScript layer throws it as a `BridgeCommandError`.
#[napi(object)]
pub struct CommandProblem {
    pub message: String,
    /// The kind's stable name (`invalid-field`, `unpaired-surrogate`, …).
    pub code: String,
    /// The command's type, when the frame named a known one.
    pub command_type: Option<String>,
    /// The top-level field at fault, when one is.
    pub field: Option<String>,
}

/// Checks a command frame encoded by `JSON.stringify` (without newline).
/// Returns why the backend would mishandle it, or `null` when it is safe to
/// send.
#[napi(catch_unwind, ts_args_type = "frame: string")]
pub fn command_frame_problem(env: Env, frame: Unknown) -> Result<Option<CommandProblem>> {
    let outcome = strings::with_utf8(&env, &frame, check_command_frame)?;
    Ok(outcome.err().map(|e| CommandProblem {
        code: e.code().to_owned(),
        command_type: e.command_type().map(str::to_owned),
        field: e.field().map(str::to_owned),
        message: e.message,
    }))
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
    /// `BridgeDecodeError.code` values the core produces, in kind order.
    pub decode_error_codes: Vec<String>,
}

#[napi(catch_unwind)]
pub fn protocol_tables() -> ProtocolTables {
    ProtocolTables {
        protocol_version: PROTOCOL_VERSION.to_owned(),
        protocol_major: PROTOCOL_MAJOR,
        event_types: owned(&EVENT_TYPES),
        command_types: owned(&COMMAND_TYPES),
        native_kinds: owned(&NATIVE_KINDS),
        model_kinds: owned(&MODEL_KINDS),
        decode_error_codes: owned(&DecodeErrorKind::CODES),
    }
}

/// The stream batch contract's constants (`bridge_core::batch`), for the
/// TypeScript side of it (`lib/stream/batch.ts`), which keeps no copy.
#[napi(object)]
pub struct BatchContract {
    /// Part kind name (`events`, `event`, `invalid`, …) → its character.
    pub part_kinds: std::collections::HashMap<String, String>,
    /// A lifted value's marker in the parsed skeleton is this text + its index.
    pub lift_marker: String,
    /// The default maximum line size, in bytes.
    pub default_max_line_bytes: f64,
    /// How much of an over-long line a decode error keeps, in bytes.
    pub too_long_prefix_bytes: u32,
    /// Lines from this many bytes on are large (their own parts, lifted).
    pub large_line_bytes: u32,
}

#[napi(catch_unwind)]
pub fn batch_contract() -> BatchContract {
    BatchContract {
        part_kinds: PartKind::ALL
            .iter()
            .map(|(kind, name)| ((*name).to_owned(), kind.as_char().to_string()))
            .collect(),
        lift_marker: MARKER_TEXT.to_owned(),
        default_max_line_bytes: DEFAULT_MAX_LINE_BYTES as f64,
        too_long_prefix_bytes: TOO_LONG_PREFIX_BYTES as u32,
        large_line_bytes: LARGE_LINE_BYTES as u32,
    }
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}
