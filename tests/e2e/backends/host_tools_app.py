"""Host-tools backend: a real agent whose tools and store are the host's.

For end-to-end tests of the host channel (docs/host-channel.md), through
any host: the Rust core's tests (crates/bridge-host-channel/tests/), the
Python publish rehearsal, and later the Node and bridge wiring. Start it
like the scenario backend, with ``agentlane_host_channel`` importable
(installed, or ``PYTHONPATH=<repo>/python/src``) and the channel's
descriptor named in ``AGENTLANE_HOST_CHANNEL_FD``:

    python -m agentlane_process_bridge --app host_tools_app:create_backend

A real ``DefaultAgent`` with a scripted model (no network). Its factory
gives the agent the host's tools in one line, ``shims=[host.tools()]``, and
with ``HOST_TOOLS_APP_STORE=1`` the host's store,
``state_store=host.state_store()``.

Environment:

``HOST_TOOLS_APP_WITHOUT_MODULE=1``
    The factory leaves the module out (what a host must notice at ``ready``).
``HOST_TOOLS_APP_STORE=1``
    The agent's state store is the host's; the agent also has an app tool,
    ``peek_store``, that loads from that store synchronously on the event
    loop's thread (as agentlane itself calls a store), e.g. while a host
    tool call of the same turn is pending.
``HOST_TOOLS_APP_APPROVALS=1``
    The agent also has the scenario backend's app tools (``write_note`` asks
    the host's approval through agentlane's broker, as usual), so one run can
    mix a host tool and an approval.
``HOST_TOOLS_APP_CALL_TIMEOUT=<seconds>``
    The module's own limit on one tool call.

The prompt's first word picks what the model does:

``calls <JSON array of {"name", "arguments"}>``
    One model turn calling every listed tool at once (the agent runs them in
    parallel), then the final answer ``Results: <r1> | <r2> | …`` with each
    tool's result text as the model saw it, in call order (a text over 300
    characters is shown as ``<n> chars sha256:<16 hex>``).
``hostile <JSON array>``
    The same, after writing hostile lines onto the channel beside the
    module's own: not JSON, a message type the host does not take (id
    ``hostile-1``), a cancel of an id never sent, a request of 2,000,000
    bytes of padding (id ``hostile-2``; ``HOST_TOOLS_APP_HOSTILE_PAD``
    changes the size), a request without an id.
``history``
    ``Seen <n> user messages: <m1> | <m2> | …``: every user message of the
    conversation, so a resumed conversation shows what it remembers.
anything else
    ``You said: <prompt>``.
"""

import hashlib
import json
import os
from typing import Any

from agentlane.harness import AgentDescriptor, StateStore
from agentlane.harness.agents import DefaultAgent
from agentlane.models import Tool, Tools
from agentlane_host_channel import host
from agentlane_process_bridge import AgentBackend
from pydantic import BaseModel
from agentlane.harness.tools import ToolApprovalBroker
from scenario_app import ScenarioConfig, ScriptedModel, Turn, _text_of, build_tools

SUMMARY_OVER = 300
"""Results longer than this are summarised in the final answer."""

_channel_fd: int | None = None
"""The channel's descriptor, for the hostile script's own writes."""


def _summary(text: str) -> str:
    if len(text) <= SUMMARY_OVER:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{len(text)} chars sha256:{digest}"


def _write_hostile_lines() -> None:
    assert _channel_fd is not None, "hostile needs the host channel"
    pad = "x" * int(os.environ.get("HOST_TOOLS_APP_HOSTILE_PAD", "2000000"))
    lines = [
        "{not json",
        '{"type":"result","id":"hostile-1","value":1}',
        '{"type":"cancel","id":"never-sent"}',
        '{"type":"call_tool","id":"hostile-2","name":"lookup","arguments":{"pad":"'
        + pad
        + '"}}',
        '{"type":"list_tools"}',
    ]
    data = ("\n".join(lines) + "\n").encode()
    while data:
        data = data[os.write(_channel_fd, data):]


def plan(messages: list[dict[str, Any]]) -> Turn:
    """The next model turn, from the latest prompt and the tool results since."""
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    prompt = _text_of(messages[last_user]).strip()
    later = messages[last_user + 1 :]
    round_ = sum(1 for m in later if m.get("role") == "assistant")
    results = [_text_of(m) for m in later if m.get("role") == "tool"]
    keyword, _, rest = prompt.partition(" ")
    if keyword in ("calls", "hostile"):
        if round_ == 0:
            if keyword == "hostile":
                _write_hostile_lines()
            calls = json.loads(rest)
            return Turn(
                text="Calling the host.",
                calls=tuple((c["name"], c.get("arguments", {})) for c in calls),
            )
        return Turn(text="Results: " + " | ".join(_summary(r) for r in results))
    if keyword == "history":
        users = [_text_of(m) for m in messages if m.get("role") == "user"]
        return Turn(text=f"Seen {len(users)} user messages: " + " | ".join(users))
    return Turn(text=f"You said: {prompt}")


def _peek_tool(store: StateStore) -> Tool[BaseModel, Any]:
    def peek_store() -> str:
        """Reads the stored revision (a synchronous store call)."""
        snapshot = store.load()
        return f"stored revision {snapshot.revision if snapshot else None}"

    return Tool.from_function(peek_store)


def _seconds(name: str) -> float | None:
    value = os.environ.get(name)
    return float(value) if value else None


def create_backend() -> AgentBackend:
    """Factory for ``--app host_tools_app:create_backend``."""
    global _channel_fd
    fd = os.environ.get("AGENTLANE_HOST_CHANNEL_FD")
    _channel_fd = int(fd) if fd else None
    with_module = os.environ.get("HOST_TOOLS_APP_WITHOUT_MODULE") != "1"
    store = host.state_store() if os.environ.get("HOST_TOOLS_APP_STORE") == "1" else None
    broker = ToolApprovalBroker() if os.environ.get("HOST_TOOLS_APP_APPROVALS") == "1" else None
    app_tools = [_peek_tool(store)] if store else []
    if broker is not None:
        app_tools += list(build_tools(broker).tools)
    agent = DefaultAgent(
        descriptor=AgentDescriptor(
            name="HostTools",
            instructions="You are a scripted test agent.",
            model=ScriptedModel(ScenarioConfig(), plan=plan),
            tools=Tools(tools=app_tools, parallel_tool_calls=True),
            # The one line that gives the agent the host's tools:
            shims=[host.tools(call_timeout=_seconds("HOST_TOOLS_APP_CALL_TIMEOUT"))]
            if with_module
            else [],
        ),
        state_store=store,
    )
    return AgentBackend(
        agent=agent, approvals=broker, ready_metadata=lambda: {"app": "host-tools"}
    )
