"""The application's own tools and state store for an AgentLane backend.

A host of ``@agentlanejs/process-bridge-native`` (or ``agentlane-bridge``)
passes the backend a side channel beside stdio; this module is the
backend's end of it (docs/host-channel.md). In the ``--app`` factory::

    from agentlane_host_channel import host

    agent = DefaultAgent(
        descriptor=AgentDescriptor(..., shims=[host.tools()]),   # the host's tools
        state_store=host.state_store(),                          # the host's store
    )
"""

__version__ = "0.1.0"

from ._errors import HostChannelError, RevisionConflictError  # noqa: E402
from ._host import Host  # noqa: E402
from ._store import HostStateStore  # noqa: E402
from ._tools import HostToolsShim  # noqa: E402

host = Host(__version__)
"""This process's host (its channel opens when the factory first uses it)."""

__all__ = [
    "Host",
    "HostChannelError",
    "HostStateStore",
    "HostToolsShim",
    "RevisionConflictError",
    "host",
]
