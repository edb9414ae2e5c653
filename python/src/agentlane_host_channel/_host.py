"""The process's one host channel, opened when the factory first asks.

Nothing happens at import: no socket, no thread. That keeps the module
safe to import in a prefork server, whose forks each open their own
channel when their factory runs.
"""

import logging
import os
import socket
import threading

from ._connection import Connection
from ._errors import HostChannelError
from ._protocol import FD_ENV, INVALID_CHANNEL, NO_CHANNEL
from ._store import HostStateStore
from ._tools import HostToolsShim, tools_of

_log = logging.getLogger("agentlane_host_channel")

LIST_TIMEOUT = 30.0
"""How long the factory waits for the host's tool list, in seconds."""


class Host:
    """The host of this backend, over the channel it passed (if any).

    Use the module's ``host``::

        from agentlane_host_channel import host

        agent = DefaultAgent(
            descriptor=AgentDescriptor(..., shims=[host.tools()]),
            state_store=host.state_store(),   # if the host keeps the state
        )
    """

    def __init__(self, package_version: str) -> None:
        self._package_version = package_version
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._pid: int | None = None

    def tools(self, *, call_timeout: float | None = None) -> HostToolsShim:
        """A shim giving the agent this conversation's host tools.

        Asks the host for its tools now, while the factory runs (so the
        host knows, by the backend's ``ready``, that the factory took them).
        ``call_timeout``: this side's limit on one call, in seconds, beside
        the host's own deadline (``None``: the host's alone). A host error,
        a timeout or a lost channel reaches the model as a failed tool call;
        the run goes on.

        Without a host channel (a host that has no tools to give) the agent
        gets no host tools, and a warning says so. A channel that cannot be
        used raises ``HostChannelError``.
        """
        connection = self._connect()
        if connection is None:
            _log.warning(
                "agentlane_host_channel: %s is not set: this backend's host gives "
                "no host channel, so the agent gets no host tools.",
                FD_ENV,
            )
            return HostToolsShim(())
        _request_id, future = connection.request("list_tools")
        try:
            reply = future.result(timeout=LIST_TIMEOUT)
        except TimeoutError:
            raise HostChannelError(
                "timeout", f"The host did not list its tools within {LIST_TIMEOUT} s."
            ) from None
        if not reply.ok:
            raise HostChannelError(
                reply.kind, f"The host did not list its tools: {reply.message}"
            )
        return HostToolsShim(tools_of(connection, reply.value, call_timeout))

    def state_store(self, *, timeout: float = 30.0) -> HostStateStore:
        """agentlane's ``StateStore`` kept by the host (``DefaultAgent(state_store=…)``).

        ``timeout``: the longest wait for one operation, in seconds (the
        store is called synchronously on the event loop's thread, so it must
        be bounded). Without a host channel this raises
        ``HostChannelError`` (kind ``no-channel``): a store that kept
        nothing would lose the conversation silently.
        """
        connection = self._connect()
        if connection is None:
            raise HostChannelError(
                NO_CHANNEL,
                f"{FD_ENV} is not set: this backend's host gives no host channel, "
                "so it cannot keep the agent's state. Start it from a host given a "
                "store, or build the agent without host.state_store().",
            )
        return HostStateStore(connection, timeout=timeout)

    def _connect(self) -> Connection | None:
        """This process's channel (opened once per process); ``None`` without one."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                return self._connection
            text = os.environ.get(FD_ENV)
            if text is None:
                return None
            sock = _socket_of(text)
            # Ours alone: no subprocess inherits it or is told of it.
            os.set_inheritable(sock.fileno(), False)
            os.environ.pop(FD_ENV, None)
            connection = Connection(sock, package_version=self._package_version)
            connection.start()
            self._connection, self._pid = connection, os.getpid()
            return connection


def _socket_of(text: str) -> socket.socket:
    """The stream socket the variable names, or a clear error."""
    try:
        descriptor = int(text)
    except ValueError:
        descriptor = -1
    if descriptor < 0:
        raise HostChannelError(
            INVALID_CHANNEL, f"{FD_ENV}={text!r} is not a descriptor number."
        )
    try:
        sock = socket.socket(fileno=descriptor)
    except OSError as error:
        raise HostChannelError(
            INVALID_CHANNEL,
            f"{FD_ENV}={descriptor} names no open socket ({error.strerror}): the host "
            "did not pass the channel's descriptor to this process.",
        ) from error
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise HostChannelError(
            INVALID_CHANNEL,
            f"{FD_ENV}={descriptor} is not a Unix stream socket.",
        )
    sock.setblocking(True)
    return sock
