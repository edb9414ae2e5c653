use std::borrow::Cow;

/// The JSON type of the value under a cursor, as `JSON.parse` would see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// A pull reader over one JSON document.
///
/// Contract: the cursor is always positioned at exactly one value. The caller
/// [`peek`](Self::peek)s it and then consumes it once, either with
/// [`skip`](Self::skip) or with the `read_*`/`enter_*` method that matches its
/// kind. After `enter_object` the caller drains the object with
/// [`next_member`](Self::next_member) (consuming each member's value before
/// asking for the next), and likewise for arrays with
/// [`next_element`](Self::next_element). Implementations never recurse on
/// input depth, so hostile nesting cannot overflow the stack.
pub trait JsonCursor: Sized {
    /// A fatal reading failure (a JSON syntax error for text).
    type Error;
    /// A remembered position of a value, to read it again with [`reopen`](Self::reopen).
    type Mark: Clone;

    /// The kind of the value at the current position, without consuming it.
    fn peek(&mut self) -> Result<Kind, Self::Error>;
    /// Consumes the current value without inspecting it.
    fn skip(&mut self) -> Result<(), Self::Error>;
    /// Consumes the current value, which must be a boolean.
    fn read_bool(&mut self) -> Result<bool, Self::Error>;
    /// Consumes the current value, which must be a number, and tells whether
    /// it is finite once converted as `JSON.parse` converts it (a literal
    /// beyond the double range becomes infinite).
    fn read_finite_number(&mut self) -> Result<bool, Self::Error>;
    /// Consumes the current value, which must be a string, and returns its
    /// text. Unpaired surrogates come back as U+FFFD.
    fn read_string(&mut self) -> Result<Cow<'_, str>, Self::Error>;
    /// Consumes the opening of the current value, which must be an object.
    fn enter_object(&mut self) -> Result<(), Self::Error>;
    /// Moves to the next member of the innermost entered object. Returns
    /// `None` when the object has ended (the cursor has left it), otherwise
    /// what `find` says about the member's key (its UTF-8 bytes, escapes decoded) (the index of a declared key,
    /// or `None`); the cursor is then positioned at the member's value.
    fn next_member<F>(&mut self, find: F) -> Result<Option<Option<usize>>, Self::Error>
    where
        F: FnMut(&[u8]) -> Option<usize>;
    /// Consumes the opening of the current value, which must be an array.
    fn enter_array(&mut self) -> Result<(), Self::Error>;
    /// Moves to the next element of the innermost entered array; `false`
    /// when the array has ended (the cursor has left it).
    fn next_element(&mut self) -> Result<bool, Self::Error>;
    /// Remembers the value at the current position (before it is consumed).
    fn mark(&mut self) -> Result<Self::Mark, Self::Error>;
    /// A new cursor positioned at a value remembered with [`mark`](Self::mark).
    fn reopen(&self, mark: &Self::Mark) -> Self;
    /// Checks that nothing but whitespace follows the document.
    fn end(&mut self) -> Result<(), Self::Error>;
}
