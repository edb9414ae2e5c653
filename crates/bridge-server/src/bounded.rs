//! No error the bridge answers repeats more than [`MAX_MESSAGE_BYTES`] of
//! message, whoever wrote it: a request's value quoted by the bridge
//! (`echo`), and connectrpc's own words, which quote what it could not take
//! (a JSON value it could not decode, the path of an unknown method, a
//! header). One mechanism at the HTTP layer covers every protocol and
//! every place an error is made: [`bound_response`] rewrites the error a
//! response carries when its message is too long (a Connect unary body, a
//! Connect stream's end message, gRPC's `grpc-message` header or trailer,
//! gRPC-Web's trailer frame) and passes everything else through untouched
//! (stream messages are not copied: only their 5-byte headers are read).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use buffa::bytes::{Bytes, BytesMut};
use connectrpc::ConnectRpcBody;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use serde_json::Value;

/// The longest error message answered, in bytes (a cut one gets a short note).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// How much of a request's value a message of the bridge quotes.
const ECHO_CHARS: usize = 64;

/// A request's value as an error message quotes it: whole when short, else
/// its start and its length.
pub fn echo(value: &str) -> String {
    match value.char_indices().nth(ECHO_CHARS) {
        None => format!("{value:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &value[..end], value.len()),
    }
}

/// `message`, cut to [`MAX_MESSAGE_BYTES`] at a character boundary with a
/// note of its length; borrowed when it fits.
pub fn bounded(message: &str) -> Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return Cow::Borrowed(message);
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}… [cut: {} bytes in all]",
        &message[..end],
        message.len()
    ))
}

/// A response body as the bridge sends it: the Connect layer's, watched
/// for an error to bound, or a rewritten whole body.
pub enum BoundedBody {
    Watched {
        inner: ConnectRpcBody,
        /// Set for envelope-framed streams: where the error frame is.
        envelopes: Option<Box<Envelopes>>,
        ready: VecDeque<Frame<Bytes>>,
        done: bool,
    },
    Whole(Full<Bytes>),
}

impl BoundedBody {
    fn watched(inner: ConnectRpcBody, envelopes: Option<Box<Envelopes>>) -> BoundedBody {
        BoundedBody::Watched {
            inner,
            envelopes,
            ready: VecDeque::new(),
            done: false,
        }
    }
}

/// Which protocol's error a response can carry, from its content type.
enum Kind {
    ConnectUnary,
    ConnectStream,
    Grpc,
    GrpcWeb,
    Other,
}

fn kind(headers: &HeaderMap) -> Kind {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("application/connect+") {
        Kind::ConnectStream
    } else if content_type.starts_with("application/grpc-web") {
        Kind::GrpcWeb
    } else if content_type.starts_with("application/grpc") {
        Kind::Grpc
    } else if content_type.starts_with("application/json") {
        Kind::ConnectUnary
    } else {
        Kind::Other
    }
}

/// The Connect layer's response with its error bounded (a unary error body
/// is read and rewritten here; a stream's is rewritten as it passes).
pub async fn bound_response(response: Response<ConnectRpcBody>) -> Response<BoundedBody> {
    let (mut head, body) = response.into_parts();
    match kind(&head.headers) {
        Kind::ConnectUnary if head.status != http::StatusCode::OK => {
            let Ok(collected) = body.collect().await;
            let bytes = collected.to_bytes();
            let bytes = bound_error_json(&bytes, false).unwrap_or(bytes);
            head.headers.remove(CONTENT_LENGTH);
            Response::from_parts(head, BoundedBody::Whole(Full::new(bytes)))
        }
        Kind::ConnectStream => Response::from_parts(
            head,
            BoundedBody::watched(body, Some(Box::new(Envelopes::new(0x02)))),
        ),
        Kind::GrpcWeb => Response::from_parts(
            head,
            BoundedBody::watched(body, Some(Box::new(Envelopes::new(0x80)))),
        ),
        Kind::Grpc => {
            bound_grpc_message(&mut head.headers);
            Response::from_parts(head, BoundedBody::watched(body, None))
        }
        Kind::ConnectUnary | Kind::Other => {
            Response::from_parts(head, BoundedBody::watched(body, None))
        }
    }
}

/// A Connect error's JSON (`{"code","message",…}`, or an end message
/// `{"error":{…}}`) with its message bounded; `None` when it needs no change.
fn bound_error_json(bytes: &[u8], end_message: bool) -> Option<Bytes> {
    if bytes.len() <= MAX_MESSAGE_BYTES {
        return None;
    }
    let mut json: Value = serde_json::from_slice(bytes).ok()?;
    let error = if end_message {
        json.get_mut("error")?
    } else {
        &mut json
    };
    let message = error.get_mut("message")?;
    let cut = match bounded(message.as_str()?) {
        Cow::Borrowed(_) => return None,
        Cow::Owned(cut) => cut,
    };
    *message = Value::String(cut);
    serde_json::to_vec(&json).ok().map(Bytes::from)
}

/// gRPC's `grpc-message` (percent-encoded) with its message bounded.
fn bound_grpc_message(headers: &mut HeaderMap) {
    let Some(value) = headers.get("grpc-message") else {
        return;
    };
    if value.len() <= MAX_MESSAGE_BYTES {
        return;
    }
    let message = percent_decode(value.as_bytes());
    let cut = bounded(&message);
    if let Ok(value) = HeaderValue::from_str(&percent_encode(&cut)) {
        headers.insert("grpc-message", value);
    }
}

fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).and_then(|&b| hex(b)),
            bytes.get(i + 2).and_then(|&b| hex(b)),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// gRPC's percent-encoding: printable ASCII but `%` as is.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// gRPC-Web's trailer frame (`key: value\r\n` lines) with its message bounded.
fn bound_grpc_web_trailers(block: &[u8]) -> Option<Bytes> {
    if block.len() <= MAX_MESSAGE_BYTES {
        return None;
    }
    let text = std::str::from_utf8(block).ok()?;
    let mut out = String::with_capacity(MAX_MESSAGE_BYTES * 2);
    for line in text.split_inclusive("\r\n") {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("grpc-message") => {
                let message = percent_decode(value.trim().as_bytes());
                let _ = write!(out, "{name}: {}\r\n", percent_encode(&bounded(&message)));
            }
            _ => out.push_str(line),
        }
    }
    Some(Bytes::from(out))
}

/// Where a stream of envelopes (1 flag byte, 4 length bytes, the message)
/// is, so that the one envelope whose flags have `error_flag` (Connect's
/// end message, gRPC-Web's trailers) is gathered and bounded. Other
/// messages pass through as they came.
pub struct Envelopes {
    error_flag: u8,
    /// Bytes of the current envelope's header read so far.
    header: BytesMut,
    /// Bytes of the current message still to pass.
    passing: usize,
    /// The error envelope, gathered until it is whole: its flags and
    /// length, and its bytes so far.
    gathering: Option<(u8, usize, BytesMut)>,
}

impl Envelopes {
    fn new(error_flag: u8) -> Envelopes {
        Envelopes {
            error_flag,
            header: BytesMut::new(),
            passing: 0,
            gathering: None,
        }
    }

    /// Takes one data frame; pushes what may go out now. Runs of it that
    /// pass go out as slices of it; the bytes of a header cut by the
    /// frame's end are held until the header is whole.
    fn take(&mut self, data: Bytes, out: &mut VecDeque<Frame<Bytes>>) {
        let n = data.len();
        // The start of the run of `data` not yet pushed.
        let mut run = 0;
        let mut i = 0;
        while i < n {
            if let Some((flags, length, gathered)) = &mut self.gathering {
                let take = (*length - gathered.len()).min(n - i);
                gathered.extend_from_slice(&data[i..i + take]);
                i += take;
                run = i;
                if gathered.len() == *length {
                    let flags = *flags;
                    out.push_back(Frame::data(self.finish_error(flags)));
                }
                continue;
            }
            if self.passing > 0 {
                let step = self.passing.min(n - i);
                self.passing -= step;
                i += step;
                continue;
            }
            let held = self.header.len();
            let step = (5 - held).min(n - i);
            self.header.extend_from_slice(&data[i..i + step]);
            let header_here = i;
            i += step;
            if self.header.len() < 5 {
                // The frame ends inside the header: its bytes wait.
                push_slice(out, &data, run, header_here);
                run = n;
                break;
            }
            let flags = self.header[0];
            let length = u32::from_be_bytes([
                self.header[1],
                self.header[2],
                self.header[3],
                self.header[4],
            ]) as usize;
            if flags & self.error_flag != 0 {
                push_slice(out, &data, run, header_here);
                run = i;
                self.header.clear();
                self.gathering =
                    Some((flags, length, BytesMut::with_capacity(length.min(1 << 20))));
                if length == 0 {
                    out.push_back(Frame::data(self.finish_error(flags)));
                }
                continue;
            }
            if held > 0 {
                // Held from the frame before (this header began it): it
                // goes out before this frame's bytes, the run from 0.
                out.push_back(Frame::data(Bytes::copy_from_slice(&self.header[..held])));
            }
            self.header.clear();
            self.passing = length;
        }
        push_slice(out, &data, run, n);
    }

    /// The gathered error envelope, its message bounded.
    fn finish_error(&mut self, flags: u8) -> Bytes {
        let (_, _, gathered) = self.gathering.take().expect("gathering");
        let message = if self.error_flag == 0x02 {
            bound_error_json(&gathered, true)
        } else {
            bound_grpc_web_trailers(&gathered)
        }
        .unwrap_or_else(|| gathered.freeze());
        let mut envelope = BytesMut::with_capacity(5 + message.len());
        envelope.extend_from_slice(&[flags]);
        envelope.extend_from_slice(&(message.len() as u32).to_be_bytes());
        envelope.extend_from_slice(&message);
        envelope.freeze()
    }

    /// The body ended: what is held goes out as it was.
    fn flush(&mut self, out: &mut VecDeque<Frame<Bytes>>) {
        if !self.header.is_empty() {
            out.push_back(Frame::data(std::mem::take(&mut self.header).freeze()));
        }
        if let Some((flags, length, gathered)) = self.gathering.take() {
            let mut envelope = BytesMut::with_capacity(5 + gathered.len());
            envelope.extend_from_slice(&[flags]);
            envelope.extend_from_slice(&(length as u32).to_be_bytes());
            envelope.extend_from_slice(&gathered);
            out.push_back(Frame::data(envelope.freeze()));
        }
    }
}

/// Pushes `data[from..to]` (a slice, no copy) when it is not empty.
fn push_slice(out: &mut VecDeque<Frame<Bytes>>, data: &Bytes, from: usize, to: usize) {
    if from < to {
        out.push_back(Frame::data(data.slice(from..to)));
    }
}

impl Body for BoundedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let (inner, envelopes, ready, done) = match self.get_mut() {
            BoundedBody::Whole(full) => return Pin::new(full).poll_frame(cx),
            BoundedBody::Watched {
                inner,
                envelopes,
                ready,
                done,
            } => (inner, envelopes, ready, done),
        };
        loop {
            if let Some(frame) = ready.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if *done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut *inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    *done = true;
                    if let Some(envelopes) = envelopes {
                        envelopes.flush(ready);
                    }
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => match envelopes {
                        Some(envelopes) => envelopes.take(data, ready),
                        None => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    },
                    Err(frame) => match frame.into_trailers() {
                        Ok(mut trailers) => {
                            bound_grpc_message(&mut trailers);
                            ready.push_back(Frame::trailers(trailers));
                        }
                        Err(other) => ready.push_back(other),
                    },
                },
                Poll::Ready(Some(Err(never))) => match never {},
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            BoundedBody::Whole(full) => full.is_end_stream(),
            BoundedBody::Watched {
                inner, ready, done, ..
            } => ready.is_empty() && (*done || inner.is_end_stream()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            BoundedBody::Whole(full) => full.size_hint(),
            // A rewritten error changes the length: only a body that is
            // never rewritten keeps its exact size.
            BoundedBody::Watched {
                inner,
                envelopes: None,
                ready,
                ..
            } if ready.is_empty() => inner.size_hint(),
            BoundedBody::Watched { .. } => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
        let mut out = vec![flags];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    /// Feeds `bytes` cut into frames of `size` bytes; returns what went out.
    fn through(error_flag: u8, bytes: &[u8], size: usize) -> Vec<u8> {
        let mut envelopes = Envelopes::new(error_flag);
        let mut out = VecDeque::new();
        for chunk in bytes.chunks(size) {
            envelopes.take(Bytes::copy_from_slice(chunk), &mut out);
        }
        envelopes.flush(&mut out);
        out.into_iter()
            .flat_map(|frame| frame.into_data().unwrap().to_vec())
            .collect()
    }

    fn end_message(message: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"error": {"code": "not_found", "message": message}}))
            .unwrap()
    }

    #[test]
    fn a_stream_passes_unchanged_when_its_end_message_is_short() {
        let mut stream = envelope(0, b"{\"a\":1}");
        stream.extend(envelope(0, &vec![b'x'; 5000]));
        stream.extend(envelope(2, &end_message("short")));
        for size in [1, 2, 3, 5, 7, 64, 100_000] {
            assert_eq!(through(2, &stream, size), stream, "frames of {size}");
        }
    }

    #[test]
    fn a_long_end_message_is_cut_wherever_the_frames_split() {
        let first = envelope(0, &vec![b'y'; 3000]);
        let long = "x".repeat(1 << 20);
        let mut stream = first.clone();
        stream.extend(envelope(2, &end_message(&long)));
        for size in [1, 4, 5, 6, 1000, 3005, 3006, 1 << 21] {
            let out = through(2, &stream, size);
            assert_eq!(out[..first.len()], first[..], "frames of {size}");
            let rest = &out[first.len()..];
            assert_eq!(rest[0], 2);
            let length = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            assert_eq!(rest.len(), 5 + length, "frames of {size}");
            let json: Value = serde_json::from_slice(&rest[5..]).unwrap();
            let message = json["error"]["message"].as_str().unwrap();
            assert!(message.len() < MAX_MESSAGE_BYTES + 64, "frames of {size}");
            assert!(message.ends_with(&format!("[cut: {} bytes in all]", long.len())));
            assert_eq!(json["error"]["code"], "not_found");
        }
    }

    #[test]
    fn grpc_web_trailers_are_cut_and_grpc_messages_too() {
        let long = "é".repeat(2000);
        let block = format!(
            "grpc-status: 5\r\ngrpc-message: {}\r\n",
            percent_encode(&long)
        );
        let out = through(0x80, &envelope(0x80, block.as_bytes()), 7);
        let text = String::from_utf8(out[5..].to_vec()).unwrap();
        assert!(
            text.starts_with("grpc-status: 5\r\ngrpc-message: "),
            "{text}"
        );
        let message = percent_decode(
            text.lines()
                .nth(1)
                .unwrap()
                .trim_start_matches("grpc-message: ")
                .as_bytes(),
        );
        assert!(
            message.starts_with("éé")
                && message.ends_with(&format!("[cut: {} bytes in all]", long.len()))
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            "grpc-message",
            HeaderValue::from_str(&percent_encode(&long)).unwrap(),
        );
        bound_grpc_message(&mut headers);
        assert!(headers["grpc-message"].len() < 3 * MAX_MESSAGE_BYTES + 100);
    }

    #[test]
    fn echo_quotes_short_values_whole_and_long_ones_by_their_start() {
        assert_eq!(echo("c1"), "\"c1\"");
        let long = "x".repeat(1 << 20);
        assert_eq!(
            echo(&long),
            format!("{:?}… (1048576 bytes)", "x".repeat(64))
        );
        assert_eq!(bounded("fits"), "fits");
    }
}
