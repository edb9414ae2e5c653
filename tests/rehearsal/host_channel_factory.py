"""A user's factory, as docs/host-channel.md shows it: the Python publish
rehearsal (scripts/rehearse-publish-python.mjs) type-checks it with
``mypy --strict`` against the installed ``agentlane-host-channel``, which
fails unless the package carries its typed marker (``py.typed``)."""

from agentlane.harness import AgentDescriptor
from agentlane.harness.agents import DefaultAgent
from agentlane.models import Model, ModelResponse
from agentlane_host_channel import HostChannelError, HostStateStore, HostToolsShim, host
from agentlane_process_bridge import AgentBackend


def create_backend(model: Model[ModelResponse]) -> AgentBackend:
    tools: HostToolsShim = host.tools(call_timeout=30.0)
    store: HostStateStore = host.state_store(timeout=10.0)
    agent = DefaultAgent(
        descriptor=AgentDescriptor(name="Support", model=model, shims=[tools]),
        state_store=store,
    )
    return AgentBackend(agent=agent)


def kind_of(error: HostChannelError) -> str:
    return error.kind
