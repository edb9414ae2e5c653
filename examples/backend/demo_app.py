"""Demo AgentLane backend for the process bridge (no network, no API key).

How to run: the bridge imports ``demo_app`` by module name, so start it with
this directory as the working directory:

    cd examples/backend
    ../../.venv/bin/python -m agentlane_process_bridge --app demo_app:create_backend

(equivalently, from any cwd with ``PYTHONPATH=<repo>/examples/backend``).
``scripts/setup-python.sh`` creates ``.venv`` with ``agentlane==0.22.0``.

What it shows: a real AgentLane ``DefaultAgent`` (the library's own runner,
tool executor and approval broker) whose model is scripted instead of calling
a provider, so every run is deterministic. For any prompt the agent

1. streams a short reply as several text deltas (``model_stream`` /
   ``text_delta`` records),
2. calls the ``save_note`` tool, which asks the host for approval through
   the shared ``ToolApprovalBroker`` (a pending ``tool_approval`` record; the
   run waits for an ``approve`` command),
3. when the host gives the agent its ``lookup`` tool (the host channel,
   ``shims=[host.tools()]``: the demo host defines it), also calls that, and
   the host's answer appears in the final answer,
4. gets the tool results ("Saved note ..." or the denial reason), and
5. streams a final answer, which becomes ``run_complete.final_output``.

``ready`` carries ``metadata: {"app": "demo"}`` and ``config: {"model":
"demo-small"}``. ``configure`` accepts ``{"model": "demo-small" |
"demo-large"}`` and rejects other keys or values (code ``rejected``).
"""

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import Any

from agentlane.harness import AgentDescriptor
from agentlane.harness.agents import DefaultAgent
from agentlane.harness.tools import (
    ToolApprovalBroker,
    ToolOperation,
    ToolPermissionDecision,
    ToolPermissionRequest,
    evaluate_tool_permission,
)
from agentlane.models import (
    Choice,
    Message,
    Model,
    ModelResponse,
    ModelStreamEvent,
    ModelStreamEventKind,
    ToolCall,
    ToolCallFunction,
    ToolExecutionContext,
    Tools,
    Usage,
)
from agentlane_process_bridge import AgentBackend, ConfigRejectedError

try:
    # The host channel's module (shipped in the npm package's python/ folder):
    # installed in this directory's uv project, put on PYTHONPATH by the demo
    # host. Other hosts of this demo agent (benchmarks, the bridge's tests)
    # run it on a Python without it: then the agent has no host tools.
    from agentlane_host_channel import host
except ImportError:
    host = None

MODELS = ("demo-small", "demo-large")
"""Closed model catalog: config values come from a fixed vocabulary."""


class DemoConfig:
    """Runtime config store (``RuntimeConfigStore`` protocol)."""

    def __init__(self) -> None:
        self.model = MODELS[0]

    def snapshot(self) -> dict[str, object]:
        return {"model": self.model}

    def apply(self, patch: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(patch) - {"model"})
        if unknown:
            raise ConfigRejectedError(f"Unknown config key: {unknown[0]}.")
        model = patch.get("model", self.model)
        if model not in MODELS:
            raise ConfigRejectedError(f"Unknown model: {model}. Choose one of {', '.join(MODELS)}.")
        self.model = model
        return self.snapshot()


class ScriptedModel(Model[ModelResponse]):
    """A streaming model that follows a fixed two-turn script.

    Turn 1 (the last message is the user's): stream a reply and call
    ``save_note``. Turn 2 (the last message is the tool result): stream the
    final answer. Events are the library's ``ModelStreamEvent`` values, exactly
    what a real provider client yields.
    """

    def __init__(self, config: DemoConfig) -> None:
        self._config = config
        self._count = 0

    async def get_response(self, messages, extra_call_args=None, schema=None, tools=None,
                           cancellation_token=None, parent_span=None, **kwargs: Any) -> ModelResponse:
        async for event in self._stream(messages, tools):
            if event.kind == ModelStreamEventKind.COMPLETED and event.response is not None:
                return event.response
        raise RuntimeError("script produced no response")

    def stream_response(self, messages, extra_call_args=None, schema=None, tools=None,
                        cancellation_token=None, parent_span=None,
                        **kwargs: Any) -> AsyncIterator[ModelStreamEvent]:
        return self._stream(messages, tools)

    async def _stream(self, messages: list[dict[str, Any]],
                      tools: Tools | None = None) -> AsyncIterator[ModelStreamEvent]:
        self._count += 1
        last = messages[-1]
        calls: list[ToolCall] = []
        if last.get("role") == "tool":
            last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
            results = [str(m.get("content")) for m in messages[last_user + 1:] if m.get("role") == "tool"]
            text = "All done. " + " ".join(results)
        else:
            text = "Sure, I will save that as a note."
            arguments = json.dumps({"title": "note.txt", "text": str(last.get("content"))})
            calls.append(ToolCall(id=f"call-{self._count}", type="function",
                                  function=ToolCallFunction(name="save_note", arguments=arguments)))
            if "lookup" in {tool.name for tool in (tools.tools if tools else [])}:
                # The host's own tool, given through the host channel.
                calls.append(ToolCall(id=f"call-{self._count}-lookup", type="function",
                                      function=ToolCallFunction(name="lookup", arguments=json.dumps({"topic": "process bridge"}))))

        for chunk in re.findall(r"\S+\s*", text):
            await asyncio.sleep(0.02)  # pace the deltas like a provider would
            yield ModelStreamEvent(kind=ModelStreamEventKind.TEXT_DELTA, text=chunk)

        response = ModelResponse(
            id=f"demo-{self._count}",
            object="chat.completion",
            created=int(time.time()),
            model=self._config.model,
            choices=[Choice(index=0, finish_reason="tool_calls" if calls else "stop",
                            message=Message(role="assistant", content=text,
                                            tool_calls=calls or None))],
            usage=Usage(prompt_tokens=len(messages) * 10, completion_tokens=len(text) // 4,
                        total_tokens=len(messages) * 10 + len(text) // 4),
        )
        yield ModelStreamEvent(kind=ModelStreamEventKind.COMPLETED, response=response)


class AskTheHost:
    """Permission policy: every note needs the host's approval."""

    def check(self, request: ToolPermissionRequest) -> ToolPermissionDecision:
        return ToolPermissionDecision.require_approval("Saving notes needs your approval.")


def create_backend() -> AgentBackend:
    """Factory for ``--app demo_app:create_backend``."""
    config = DemoConfig()
    # The same broker must reach both the tool (to ask) and the bridge (to
    # deliver ``approve`` commands); AgentBackend hands it to the bridge.
    broker = ToolApprovalBroker()
    notes: dict[str, str] = {}

    async def save_note(title: str, text: str, context: ToolExecutionContext) -> str:
        """Save a short text note in memory."""
        request = ToolPermissionRequest(tool_name="save_note", operation=ToolOperation.CREATE_FILE,
                                        cwd=PurePosixPath("/notes"),
                                        path=PurePosixPath("/notes") / title)
        blocked = await evaluate_tool_permission(request, policy=AskTheHost(),
                                                 approval_callback=broker.callback, context=context)
        if blocked is not None:
            return f"Note not saved: {blocked}"
        notes[title] = text
        return f"Saved note {title} ({len(text)} characters)."

    agent = DefaultAgent(descriptor=AgentDescriptor(
        name="Assistant",
        instructions="You save notes for the user.",
        model=ScriptedModel(config),
        tools=Tools([save_note]),
        # The host's own tools (the demo host's `lookup`), over the host channel.
        shims=[host.tools()] if host is not None else [],
    ))
    return AgentBackend(agent=agent, approvals=broker,
                        ready_metadata=lambda: {"app": "demo"}, config=config)
