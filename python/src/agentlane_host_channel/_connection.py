"""One host channel: the socket, its reader thread and the pending requests.

Every request is a ``concurrent.futures.Future`` that the reader thread
resolves. A synchronous caller (agentlane's ``StateStore`` is synchronous
and is called on the event loop's thread, even while tool calls are
pending) blocks on ``Future.result``; a coroutine awaits
``asyncio.wrap_future``. The reader never needs the event loop, so a
blocking store call cannot deadlock the loop's own pending tool calls.
"""

import json
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from itertools import count

from ._protocol import (
    CHANNEL_LOST,
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    REQUEST_TOO_LONG,
)

_log = logging.getLogger("agentlane_host_channel")

_READ_BYTES = 1 << 20
_REMEMBERED_IDS = 4096
"""Ended request ids kept, so that a late answer is told from a stray one."""

_RESULT_PREFIX = b'{"type":"result","id":"'
"""How the host writes every result line: its request id comes next."""


@dataclass(frozen=True, slots=True)
class Reply:
    """The host's answer to one request, or why none will come."""

    ok: bool
    value: object = None
    kind: str = ""
    message: str = ""
    fields: tuple[str, ...] = ()

    @classmethod
    def failure(cls, kind: str, message: str) -> "Reply":
        """A failed request: its kind and why."""
        return cls(ok=False, kind=kind, message=message)


Decoder = Callable[[bytes, str], Reply | None]
"""Reads a whole result line for one request in one pass (line, request id).

``None``: it cannot; the line then takes the general path (``json.loads``
and the usual checks), so a decoder changes how fast a reply is read,
never what it is.
"""


def _resolve(future: "Future[Reply]", reply: Reply) -> None:
    try:
        future.set_result(reply)
    except InvalidStateError:
        # The caller gave up on it (cancelled): nobody waits for the reply.
        pass


class Connection:
    """The backend's end of one host channel, shared by tools and store."""

    def __init__(self, sock: socket.socket, *, package_version: str) -> None:
        self._sock = sock
        self._package_version = package_version
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[str, Future[Reply]] = {}
        self._decoders: dict[str, Decoder] = {}
        self._ended: deque[str] = deque(maxlen=_REMEMBERED_IDS)
        self._ended_set: set[str] = set()
        self._ids = count(1)
        self._lost = False

    @property
    def lost(self) -> bool:
        """Whether the channel broke or closed (no request can be served)."""
        return self._lost

    def start(self) -> None:
        """States this module's version, then reads the host's replies."""
        self._write(
            {
                "type": "hello",
                "version": PROTOCOL_VERSION,
                "package": "agentlane-host-channel",
                "package_version": self._package_version,
            }
        )
        threading.Thread(
            target=self._read, name="agentlane-host-channel", daemon=True
        ).start()

    def request(self, type_: str, **fields: object) -> tuple[str, "Future[Reply]"]:
        """Sends one request; its id and the future of its reply.

        The future is always resolved with a ``Reply`` (never an exception):
        the host's answer, or the reason none will come.
        """
        return self._request(type_, None, fields)

    def request_decoded(
        self, type_: str, decode: Decoder, **fields: object
    ) -> tuple[str, "Future[Reply]"]:
        """``request``, whose result line ``decode`` reads first (``Decoder``).

        For large answers of a known shape (a snapshot): parsing the line
        to Python objects and then validating those would read it twice.
        """
        return self._request(type_, decode, fields)

    def _request(
        self, type_: str, decode: Decoder | None, fields: dict[str, object]
    ) -> tuple[str, "Future[Reply]"]:
        request_id = str(next(self._ids))
        future: Future[Reply] = Future()
        with self._lock:
            if self._lost:
                _resolve(future, _lost_reply())
                return request_id, future
            self._pending[request_id] = future
            if decode is not None:
                self._decoders[request_id] = decode
        # `type` and `id` first: a host that cannot take the line reads the
        # id from its first bytes and still answers.
        failure = self._write({"type": type_, "id": request_id, **fields})
        if failure is not None:
            with self._lock:
                self._pending.pop(request_id, None)
                self._decoders.pop(request_id, None)
            _resolve(future, failure)
        return request_id, future

    def cancel(self, request_id: str) -> None:
        """Gives a request up: no answer is wanted, the host is told."""
        with self._lock:
            future = self._pending.pop(request_id, None)
            self._decoders.pop(request_id, None)
            self._remember_ended(request_id)
            lost = self._lost
        if future is None or lost:
            return
        future.cancel()
        self._write({"type": "cancel", "id": request_id})

    def close(self) -> None:
        """Ends the channel from this side (pending requests fail)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _write(self, message: dict[str, object]) -> Reply | None:
        """Writes one line; why it could not, if it could not."""
        try:
            text = json.dumps(message, ensure_ascii=False, allow_nan=False)
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate: sent escaped, the host refuses the line by
            # its id (`invalid-request`), so the request still ends.
            data = json.dumps(message, allow_nan=False).encode("ascii")
        except (TypeError, ValueError) as error:
            return Reply.failure(
                "invalid-request", f"The request cannot be sent as JSON: {error}."
            )
        if len(data) > MAX_LINE_BYTES:
            return Reply.failure(
                REQUEST_TOO_LONG,
                f"The request is {len(data)} bytes, over the host channel's "
                f"line limit of {MAX_LINE_BYTES}.",
            )
        try:
            with self._write_lock:
                self._sock.sendall(data + b"\n")
        except OSError as error:
            self._on_lost(f"writing failed: {error}")
            return _lost_reply()
        return None

    def _read(self) -> None:
        """The reader thread: frames lines, resolves the pending requests."""
        reason = "the host closed it"
        parts: list[bytes] = []
        size = 0
        skipping = False
        try:
            while chunk := self._sock.recv(_READ_BYTES):
                start = 0
                while True:
                    end = chunk.find(b"\n", start)
                    piece = chunk[start:] if end < 0 else chunk[start:end]
                    if not skipping and size + len(piece) > MAX_LINE_BYTES:
                        _log.warning(
                            "a line from the host exceeds %d bytes; it is dropped.",
                            MAX_LINE_BYTES,
                        )
                        skipping = True
                        parts, size = [], 0
                    if end < 0:
                        if not skipping and piece:
                            parts.append(piece)
                            size += len(piece)
                        break
                    if not skipping:
                        self._take(b"".join(parts) + piece if parts else piece)
                    skipping = False
                    parts, size = [], 0
                    start = end + 1
        except OSError as error:
            reason = f"reading failed: {error}"
        finally:
            self._on_lost(reason)

    def _take(self, line: bytes) -> None:
        """Judges one line from the host and resolves its request."""
        if self._decoders and self._take_decoded(line):
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as error:
            # RecursionError: nested deeper than the decoder goes (the host
            # sends at most 128 levels); one such line must not end the
            # reading thread and with it every pending call.
            _log.warning("a line from the host is not JSON: %s", error)
            return
        if not isinstance(message, dict):
            _log.warning("a line from the host is not an object.")
            return
        type_ = message.get("type")
        request_id = message.get("id")
        if type_ not in ("result", "error") or not isinstance(request_id, str):
            _log.warning(
                "a message from the host has no known type and id (type %r).",
                type_,
            )
            return
        with self._lock:
            future = self._pending.pop(request_id, None)
            self._decoders.pop(request_id, None)
            if future is None:
                known = request_id in self._ended_set
            else:
                self._remember_ended(request_id)
        if future is None:
            if not known:
                _log.warning("a reply for unknown request id %r.", request_id)
            # Else the answer to a request this module gave up: expected.
            return
        _resolve(future, _reply_of(message))

    def _take_decoded(self, line: bytes) -> bool:
        """Whether the line was a result its request's decoder could read.

        Ids are this module's decimal numbers, so the host's result line for
        one starts ``_RESULT_PREFIX`` + the id + ``"``; anything else (an
        escape, another order, a malformed value) is left to ``_take``.
        """
        if not line.startswith(_RESULT_PREFIX):
            return False
        end = line.find(b'"', len(_RESULT_PREFIX))
        if end < 0:
            return False
        request_id = line[len(_RESULT_PREFIX) : end].decode("ascii", "replace")
        with self._lock:
            decode = self._decoders.get(request_id)
        if decode is None:
            return False
        try:
            reply = decode(line, request_id)
        except Exception:  # noqa: BLE001 - the general path meets it again, where it is reported
            # Never end the reading thread: the caller sees what the
            # general path makes of the line (its own decoding raises there).
            reply = None
        if reply is None:
            return False
        with self._lock:
            future = self._pending.pop(request_id, None)
            self._decoders.pop(request_id, None)
            if future is not None:
                self._remember_ended(request_id)
        if future is not None:
            _resolve(future, reply)
        # Else it was given up while being read: a late answer, quiet.
        return True

    def _on_lost(self, reason: str) -> None:
        with self._lock:
            if self._lost:
                return
            self._lost = True
            pending = list(self._pending.values())
            self._pending.clear()
            self._decoders.clear()
        if pending:
            _log.warning(
                "the host channel was lost (%s); %d request(s) fail.",
                reason,
                len(pending),
            )
        for future in pending:
            _resolve(future, _lost_reply())

    def _remember_ended(self, request_id: str) -> None:
        if request_id in self._ended_set:
            return
        if len(self._ended) == self._ended.maxlen:
            self._ended_set.discard(self._ended[0])
        self._ended.append(request_id)
        self._ended_set.add(request_id)


def _lost_reply() -> Reply:
    return Reply.failure(
        CHANNEL_LOST, "The host channel was lost: the host will not answer."
    )


def _reply_of(message: dict[str, object]) -> Reply:
    """A ``result`` or ``error`` message as a ``Reply``."""
    if message["type"] == "result":
        if "value" not in message:
            return Reply.failure("invalid-result", "The host's result has no value.")
        return Reply(ok=True, value=message["value"])
    error = message.get("error")
    if isinstance(error, dict):
        kind = error.get("kind")
        text = error.get("message")
        fields = error.get("fields", [])
        if (
            isinstance(kind, str)
            and isinstance(text, str)
            and isinstance(fields, list)
            and all(isinstance(field, str) for field in fields)
        ):
            return Reply(ok=False, kind=kind, message=text, fields=tuple(fields))
    return Reply.failure("invalid-result", "The host's error reply is malformed.")
