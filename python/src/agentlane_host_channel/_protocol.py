"""The host channel's contract, the backend's side (docs/host-channel.md).

The host's side states the same constants in
``crates/bridge-host-channel/src/protocol.rs``; the test
``crates/bridge-host-channel/tests/contract.rs`` fails when the two differ.
"""

from typing import Final

PROTOCOL_VERSION: Final = "1.0"
"""The channel protocol version this module speaks (stated in ``hello``)."""

FD_ENV: Final = "AGENTLANE_HOST_CHANNEL_FD"
"""The environment variable naming the inherited descriptor of the channel."""

MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest line either side sends or accepts, without its newline."""

MAX_ID_BYTES: Final = 128
"""The longest request id the host takes."""

BACKEND_MESSAGE_TYPES: Final = (
    "hello",
    "list_tools",
    "call_tool",
    "cancel",
    "store_load",
    "store_save",
    "store_delete",
)
"""What this module sends."""

HOST_MESSAGE_TYPES: Final = ("result", "error")
"""What the host sends."""

REPLY_ERROR_KINDS: Final = (
    "tool-error",
    "invalid-arguments",
    "unknown-tool",
    "invalid-result",
    "timeout",
    "cancelled",
    "host-unavailable",
    "revision-conflict",
    "store-error",
    "no-store",
    "invalid-request",
    "unsupported-version",
)
"""The kinds of the host's error replies."""

CHANNEL_LOST: Final = "channel-lost"
"""The channel broke or closed: no answer will come."""

TIMEOUT: Final = "timeout"
"""The deadline passed (the host's, or this module's own)."""

REQUEST_TOO_LONG: Final = "request-too-long"
"""A request over the line limit, never sent."""

NO_CHANNEL: Final = "no-channel"
"""This backend was started without a host channel (raised, never sent)."""

INVALID_CHANNEL: Final = "invalid-channel"
"""The variable names no usable channel (raised, never sent)."""

MODULE_ERROR_KINDS: Final = (
    CHANNEL_LOST,
    TIMEOUT,
    REQUEST_TOO_LONG,
    NO_CHANNEL,
    INVALID_CHANNEL,
)
"""The kinds this module gives on its own."""

REVISION_CONFLICT: Final = "revision-conflict"
