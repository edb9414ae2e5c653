//! A `JsonCursor` over a JavaScript value that `JSON.parse` produced.
//!
//! For large lines, copying the text out of V8 costs more than validating it
//! (a 10 MB line: about 4 ms to copy, 0.3 ms to validate). So the TypeScript
//! layer parses such a line first and the core's validator walks the parsed
//! value instead, reading only the members the schema checks: the cost no
//! longer depends on the size of the open payloads. The walk judges exactly
//! the object `JSON.parse` built (last duplicate key, `__proto__` as an own
//! key, numbers already converted), so it agrees with the text walk.

use std::borrow::Cow;

use bridge_core::json::{JsonCursor, Kind};
use napi::{check_status, sys, Error, Result, Status};

// Why the `unsafe` blocks of this file are sound: each is one Node-API call
// with `self.env`, the environment of the `validateEventValue` call that
// created the cursor and outlives it; handles from that call's scope (the
// value, and what was read from it), which stay live until it returns; and
// local out-pointers. The cursor never escapes the call.

/// A container the cursor has entered.
enum Entered {
    Object {
        object: sys::napi_value,
        keys: sys::napi_value,
        next: u32,
        len: u32,
    },
    Array {
        array: sys::napi_value,
        next: u32,
        len: u32,
    },
}

pub(crate) struct ValueCursor {
    env: sys::napi_env,
    /// The value at the current position.
    current: sys::napi_value,
    /// Entered containers, innermost last. Its depth is bounded by the
    /// schema, not by the input: only checked containers are entered.
    stack: Vec<Entered>,
    /// UTF-8 of the key read last.
    key: Vec<u8>,
}

impl ValueCursor {
    pub(crate) fn new(env: sys::napi_env, value: sys::napi_value) -> Self {
        ValueCursor {
            env,
            current: value,
            stack: Vec::new(),
            key: Vec::new(),
        }
    }

    fn type_of(&self) -> Result<sys::napi_valuetype> {
        let mut kind = 0;
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_typeof(self.env, self.current, &mut kind) })?;
        Ok(kind)
    }

    fn array_length(&self, array: sys::napi_value) -> Result<u32> {
        let mut len = 0;
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_get_array_length(self.env, array, &mut len) })?;
        Ok(len)
    }

    fn element(&self, array: sys::napi_value, index: u32) -> Result<sys::napi_value> {
        let mut value = std::ptr::null_mut();
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_get_element(self.env, array, index, &mut value) })?;
        Ok(value)
    }

    /// Copies a JavaScript string's UTF-8 into `out` (unpaired surrogates
    /// become U+FFFD).
    fn utf8_into(&self, string: sys::napi_value, out: &mut Vec<u8>) -> Result<()> {
        let mut len = 0;
        // SAFETY: see the top of this file.
        check_status!(unsafe {
            sys::napi_get_value_string_utf8(self.env, string, std::ptr::null_mut(), 0, &mut len)
        })?;
        out.clear();
        out.resize(len + 1, 0);
        let mut written = 0;
        // SAFETY: see the top of this file.
        check_status!(unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                string,
                out.as_mut_ptr().cast(),
                out.len(),
                &mut written,
            )
        })?;
        out.truncate(written);
        Ok(())
    }
}

fn not_json(what: &str) -> Error {
    Error::new(
        Status::InvalidArg,
        format!("Expected a value produced by JSON.parse, found {what}."),
    )
}

impl JsonCursor for ValueCursor {
    type Error = Error;
    type Mark = sys::napi_value;

    fn peek(&mut self) -> Result<Kind> {
        Ok(match self.type_of()? {
            sys::ValueType::napi_null => Kind::Null,
            sys::ValueType::napi_boolean => Kind::Bool,
            sys::ValueType::napi_number => Kind::Number,
            sys::ValueType::napi_string => Kind::String,
            sys::ValueType::napi_object => {
                let mut is_array = false;
                // SAFETY: see the top of this file.
                check_status!(unsafe {
                    sys::napi_is_array(self.env, self.current, &mut is_array)
                })?;
                if is_array {
                    Kind::Array
                } else {
                    Kind::Object
                }
            }
            sys::ValueType::napi_undefined => return Err(not_json("undefined")),
            _ => return Err(not_json("a function, symbol or other non-JSON value")),
        })
    }

    fn skip(&mut self) -> Result<()> {
        // Nothing to consume: the next move replaces the current value.
        Ok(())
    }

    fn read_bool(&mut self) -> Result<bool> {
        let mut value = false;
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_get_value_bool(self.env, self.current, &mut value) })?;
        Ok(value)
    }

    fn read_finite_number(&mut self) -> Result<bool> {
        let mut value = 0.0;
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_get_value_double(self.env, self.current, &mut value) })?;
        Ok(value.is_finite())
    }

    fn read_string(&mut self) -> Result<Cow<'_, str>> {
        let mut bytes = Vec::new();
        self.utf8_into(self.current, &mut bytes)?;
        Ok(Cow::Owned(
            String::from_utf8(bytes).map_err(|e| Error::from_reason(e.to_string()))?,
        ))
    }

    fn enter_object(&mut self) -> Result<()> {
        let mut keys = std::ptr::null_mut();
        // Own, enumerable, string keys: what Object.keys() lists, which for
        // a JSON.parse result is every key of the text (duplicates merged).
        // SAFETY: see the top of this file.
        check_status!(unsafe {
            sys::napi_get_all_property_names(
                self.env,
                self.current,
                sys::KeyCollectionMode::own_only,
                sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                sys::KeyConversion::numbers_to_strings,
                &mut keys,
            )
        })?;
        let len = self.array_length(keys)?;
        self.stack.push(Entered::Object {
            object: self.current,
            keys,
            next: 0,
            len,
        });
        Ok(())
    }

    fn next_member<F>(&mut self, mut find: F) -> Result<Option<Option<usize>>>
    where
        F: FnMut(&[u8]) -> Option<usize>,
    {
        let Some(Entered::Object {
            object,
            keys,
            next,
            len,
        }) = self.stack.last_mut()
        else {
            return Err(Error::from_reason("next_member outside an object"));
        };
        if *next >= *len {
            self.stack.pop();
            return Ok(None);
        }
        let (object, keys, index) = (*object, *keys, *next);
        *next += 1;
        let key = self.element(keys, index)?;
        let mut key_bytes = std::mem::take(&mut self.key);
        let read = self.utf8_into(key, &mut key_bytes);
        let found = read.map(|_| find(&key_bytes));
        self.key = key_bytes;
        let found = found?;
        let mut value = std::ptr::null_mut();
        // SAFETY: see the top of this file.
        check_status!(unsafe { sys::napi_get_property(self.env, object, key, &mut value) })?;
        self.current = value;
        Ok(Some(found))
    }

    fn enter_array(&mut self) -> Result<()> {
        let len = self.array_length(self.current)?;
        self.stack.push(Entered::Array {
            array: self.current,
            next: 0,
            len,
        });
        Ok(())
    }

    fn next_element(&mut self) -> Result<bool> {
        let Some(Entered::Array { array, next, len }) = self.stack.last_mut() else {
            return Err(Error::from_reason("next_element outside an array"));
        };
        if *next >= *len {
            self.stack.pop();
            return Ok(false);
        }
        let (array, index) = (*array, *next);
        *next += 1;
        self.current = self.element(array, index)?;
        Ok(true)
    }

    fn mark(&mut self) -> Result<sys::napi_value> {
        Ok(self.current)
    }

    fn reopen(&self, mark: &sys::napi_value) -> Self {
        ValueCursor::new(self.env, *mark)
    }

    fn end(&mut self) -> Result<()> {
        Ok(())
    }
}
