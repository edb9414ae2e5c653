"""Scenario backend for end-to-end tests of the process-bridge host.

Start it with the cwd set to this directory (so ``scenario_app`` is importable):

    cd tests/e2e/backends
    ../../../.venv/bin/python -m agentlane_process_bridge --app scenario_app:create_backend

or from any cwd with ``PYTHONPATH=<repo>/tests/e2e/backends``.

Why this exists: the host needs real backend traffic for many situations, and
one process per situation would make the tests slow (importing agentlane takes
most of a second). So a single backend runs a *real* AgentLane ``DefaultAgent``
(real runner, real tool executor, real approval broker, real plan tool) whose
model is scripted: it never touches the network and picks its behaviour from
the first word of the user prompt. An optional second word is an argument.

Scenario keywords (unknown first words behave like ``chat``):

``chat [words...]``
    Streams "Hello! This is a scripted reply. You said: <prompt>" as several
    text deltas; final_output is exactly that string. One model turn.
``unicode``
    Like chat, but the text holds non-ASCII, an emoji, U+2028/U+2029, CR/LF.
``reason``
    One ``provider`` model event, three ``reasoning`` deltas, then text.
``note [path]``
    Text, then one ``write_note`` call that needs approval (pending
    ``tool_approval`` record; the run waits for ``approve``). Allowed:
    tool_end result "Saved <n> characters to /notes/<path>." (ok true).
    Denied: result is the denial reason (ok false, error kind "denied").
    Second turn streams "Done: <tool result>" as the final answer.
``parallel``
    One model turn with two ``write_note`` calls (a.txt, b.txt) run in
    parallel: two pending approvals are outstanding at the same time and can
    be answered in any order. Final answer "Results: <r1> | <r2>".
``auto``
    One ``stamp`` call whose approval the broker records as an automatic
    allow: pending and resolved records arrive back to back, no command needed.
``plan``
    Two ``write_plan`` calls in two turns (the library's plan tool, so the
    bridge emits ``plan_updated`` after each ``tool_end``), then a final
    answer. The plan is persisted in ``shim_state`` ("harness-tools:plan").
``slow [seconds=60]``
    Streams "tick <i> " every 0.25 s for the given time, so the host can
    cancel, reset or shut down mid-stream. Completes normally if left alone.
``slowtool [seconds=60]``
    Calls ``sleep`` (no approval) which sleeps for the given time.
``fail``
    Streams two deltas, emits a model ``error`` stream event, then raises
    ``RuntimeError("Scripted model failure.")`` -> ``error`` scope ``run``.
``toolfail``
    Calls ``broken`` which returns a ToolFailure (tool_end ok false, error
    kind "error"); the run then completes normally.
``big [chars=20000000]``
    Calls ``make_blob`` (no approval) returning an ASCII string of exactly
    that many characters; only tool_end carries it (the model sees a summary).
``bigjson [bytes=20000000]``
    Calls ``make_records`` returning ``{"rows": [...]}`` of roughly that size.
``count``
    Answers "This conversation has <n> user message(s)." so tests can see
    conversation memory and that ``reset`` clears it.

Ids: approval request ids are ``tool-approval-1``, ``-2``, ... per process
(never reset); tool-call ids ``call-1``, ``call-2``, ... per process.
``turn_count`` accumulates over the conversation and the library's runner
refuses to go past 128 turns, so send ``reset`` between tests that share one
backend.

Runtime config: ``{"model": "scripted-1"}``. ``configure`` accepts
``{"model": <non-empty string>}`` (the name shows up in responses' ``model``),
rejects unknown keys and bad values with ``ConfigRejectedError`` (code
``rejected``), and the key ``"crash"`` makes the store raise a plain
exception (code ``internal``).
"""

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from agentlane.harness import AgentDescriptor, ToolError, ToolFailure
from agentlane.harness.agents import DefaultAgent
from agentlane.harness.tools import (
    HarnessToolsShim,
    ToolApprovalBroker,
    ToolOperation,
    ToolPermissionDecision,
    ToolPermissionRequest,
    evaluate_tool_permission,
    plan_tool,
)
from agentlane.models import (
    Choice,
    Message,
    Model,
    ModelResponse,
    ModelStreamEvent,
    ModelStreamEventKind,
    Tool,
    ToolCall,
    ToolCallFunction,
    ToolExecutionContext,
    Tools,
    Usage,
)
from agentlane_process_bridge import AgentBackend, ConfigRejectedError

DEFAULT_MODEL = "scripted-1"
NOTES_ROOT = PurePosixPath("/notes")
DELTA_DELAY = 0.005
"""Small pause between deltas so streams look like a real provider's."""

SCENARIOS = (
    "auto", "big", "bigjson", "chat", "count", "fail", "note", "parallel",
    "plan", "reason", "slow", "slowtool", "toolfail", "unicode",
)


# --------------------------------------------------------------------------
# Runtime config store


class ScenarioConfig:
    """Runtime config store: one ``model`` key holding a non-empty string."""

    def __init__(self) -> None:
        self.model = DEFAULT_MODEL

    def snapshot(self) -> dict[str, object]:
        return {"model": self.model}

    def apply(self, patch: dict[str, object]) -> dict[str, object]:
        # Validate the whole patch before mutating anything.
        if "crash" in patch:
            raise RuntimeError("config store crashed on purpose")
        for key in patch:
            if key != "model":
                raise ConfigRejectedError(f"Unknown config key: {key}.")
        if "model" in patch:
            value = patch["model"]
            if not isinstance(value, str) or not value.strip():
                raise ConfigRejectedError("model must be a non-empty string.")
            self.model = value
        return self.snapshot()


# --------------------------------------------------------------------------
# Scripted model


@dataclass
class Turn:
    """What the scripted model does in one model call."""

    text: str = ""
    reasoning: tuple[str, ...] = ()
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    delay: float = DELTA_DELAY
    provider_event: bool = False
    fail: str | None = None
    chunks: list[str] = field(default_factory=list)
    """Explicit text deltas; when empty, ``text`` is split at word ends."""


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _arg(words: list[str], default: int) -> int:
    try:
        return int(words[1].replace("_", ""))
    except (IndexError, ValueError):
        return default


def plan_turn(messages: list[dict[str, Any]]) -> Turn:
    """Decide the next model turn from the conversation so far.

    The scenario comes from the latest user message; ``round`` counts the
    assistant turns already taken since that message, and ``results`` holds
    the tool outputs the model is answering (empty on the first turn).
    """
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    prompt = _text_of(messages[last_user]).strip()
    later = messages[last_user + 1 :]
    round_ = sum(1 for m in later if m.get("role") == "assistant")
    tail = later  # messages after the most recent assistant turn
    for index, message in enumerate(later):
        if message.get("role") == "assistant":
            tail = later[index + 1 :]
    results = [_text_of(m) for m in tail if m.get("role") == "tool"]
    words = prompt.split()
    keyword = words[0].lower() if words else "chat"

    if keyword == "unicode":
        return Turn(chunks=["Héllo ", "wörld — ", "你好 ", "🌍 ", "line\u2028sep ",
                            "para\u2029sep ", "tab\there ", "crlf\r\nend"])
    if keyword == "reason":
        return Turn(provider_event=True,
                    reasoning=("Thinking about ", "the question ", "carefully."),
                    text="Reasoned answer: 42.")
    if keyword == "count":
        users = sum(1 for m in messages if m.get("role") == "user")
        return Turn(text=f"This conversation has {users} user message(s).")
    if keyword == "note":
        if round_ == 0:
            path = words[1] if len(words) > 1 else "note.txt"
            return Turn(text="I'll save that as a note.",
                        calls=(("write_note", {"path": path, "content": prompt}),))
        return Turn(text=f"Done: {results[0]}")
    if keyword == "parallel":
        if round_ == 0:
            return Turn(text="Saving two notes at once.", calls=(
                ("write_note", {"path": "a.txt", "content": "first"}),
                ("write_note", {"path": "b.txt", "content": "second"}),
            ))
        return Turn(text="Results: " + " | ".join(results))
    if keyword == "auto":
        if round_ == 0:
            return Turn(calls=(("stamp", {"label": "auto"}),))
        return Turn(text=f"Stamped: {results[0]}")
    if keyword == "plan":
        if round_ == 0:
            return Turn(text="Let me plan this.", calls=(("write_plan", {
                "explanation": "Starting the work.",
                "plan": [
                    {"step": "Read the input", "status": "in_progress"},
                    {"step": "Write the answer", "status": "pending"},
                    {"step": "Review the answer", "status": "pending"},
                ],
            }),))
        if round_ == 1:
            return Turn(calls=(("write_plan", {
                "explanation": None,
                "plan": [
                    {"step": "Read the input", "status": "completed"},
                    {"step": "Write the answer", "status": "completed"},
                    {"step": "Review the answer", "status": "completed"},
                ],
            }),))
        return Turn(text="All planned steps are done.")
    if keyword == "slow":
        seconds = _arg(words, 60)
        ticks = max(1, seconds * 4)
        return Turn(chunks=[f"tick {i} " for i in range(1, ticks + 1)], delay=0.25)
    if keyword == "slowtool":
        if round_ == 0:
            return Turn(text="Sleeping.", calls=(("sleep", {"seconds": _arg(words, 60)}),))
        return Turn(text=f"Woke up: {results[0]}")
    if keyword == "fail":
        return Turn(chunks=["This run ", "will fail."], fail="Scripted model failure.")
    if keyword == "toolfail":
        if round_ == 0:
            return Turn(calls=(("broken", {}),))
        return Turn(text=f"The tool failed: {results[0]}")
    if keyword in ("big", "bigjson"):
        if round_ == 0:
            tool = "make_blob" if keyword == "big" else "make_records"
            return Turn(calls=((tool, {"size": _arg(words, 20_000_000)}),))
        return Turn(text=f"Received {results[0]}")
    return Turn(text=f"Hello! This is a scripted reply. You said: {prompt}")


class ScriptedModel(Model[ModelResponse]):
    """Deterministic stand-in for a streaming chat-completions provider.

    It implements the library's ``Model`` interface, so the harness treats it
    like any provider client: ``stream_response`` yields ``ModelStreamEvent``
    values (which the bridge forwards as ``model_stream`` records) and ends
    with a ``completed`` event carrying an OpenAI-shaped ``ChatCompletion``.
    """

    def __init__(self, config: ScenarioConfig,
                 plan: Callable[[list[dict[str, Any]]], Turn] = plan_turn) -> None:
        # Another backend (host_tools_app) streams its own script through it.
        self._plan = plan
        self._config = config
        self._responses = 0
        self._calls = 0

    async def get_response(self, messages, extra_call_args=None, schema=None,
                           tools=None, cancellation_token=None, parent_span=None,
                           **kwargs: Any) -> ModelResponse:
        response = None
        async for event in self._stream(messages):
            if event.kind == ModelStreamEventKind.COMPLETED:
                response = event.response
        assert response is not None
        return response

    def stream_response(self, messages, extra_call_args=None, schema=None,
                        tools=None, cancellation_token=None, parent_span=None,
                        **kwargs: Any) -> AsyncIterator[ModelStreamEvent]:
        return self._stream(messages)

    async def _stream(self, messages: list[dict[str, Any]]) -> AsyncIterator[ModelStreamEvent]:
        turn = self._plan(messages)
        self._responses += 1
        response_id = f"resp-{self._responses}"
        kind = ModelStreamEventKind

        if turn.provider_event:
            yield ModelStreamEvent(kind=kind.PROVIDER, provider_event_type="response.created",
                                   raw={"type": "response.created", "response_id": response_id})
        for piece in turn.reasoning:
            await asyncio.sleep(turn.delay)
            yield ModelStreamEvent(kind=kind.REASONING, reasoning=piece, item_index=0,
                                   item_type="reasoning",
                                   provider_event_type="response.reasoning_summary_text.delta")
        chunks = turn.chunks or re.findall(r"\S+\s*", turn.text)
        for chunk in chunks:
            await asyncio.sleep(turn.delay)
            yield ModelStreamEvent(kind=kind.TEXT_DELTA, text=chunk)

        calls: list[ToolCall] = []
        for index, (name, args) in enumerate(turn.calls):
            self._calls += 1
            call_id = f"call-{self._calls}"
            arguments = json.dumps(args)
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                yield ModelStreamEvent(kind=kind.TOOL_CALL_ARGUMENTS_DELTA, tool_call_id=call_id,
                                       tool_call_index=index, arguments_delta=piece)
            calls.append(ToolCall(id=call_id, type="function",
                                  function=ToolCallFunction(name=name, arguments=arguments)))

        if turn.fail is not None:
            error = RuntimeError(turn.fail)
            yield ModelStreamEvent(kind=kind.ERROR, error=error)
            raise error

        content = "".join(chunks) or None
        prompt_chars = sum(len(_text_of(m)) for m in messages)
        completion_chars = len(content or "") + sum(len(c.function.arguments) for c in calls)
        response = ModelResponse(
            id=response_id,
            object="chat.completion",
            created=int(time.time()),
            model=self._config.model,
            choices=[Choice(
                index=0,
                finish_reason="tool_calls" if calls else "stop",
                message=Message(role="assistant", content=content, tool_calls=calls or None),
            )],
            usage=Usage(prompt_tokens=prompt_chars // 4, completion_tokens=completion_chars // 4,
                        total_tokens=prompt_chars // 4 + completion_chars // 4),
        )
        yield ModelStreamEvent(kind=kind.COMPLETED, response=response)


# --------------------------------------------------------------------------
# Tools


class _NeedsApproval:
    """Permission policy that asks the host for every note write."""

    def check(self, request: ToolPermissionRequest) -> ToolPermissionDecision:
        return ToolPermissionDecision.require_approval("Writing a note needs approval.")


def build_tools(broker: ToolApprovalBroker) -> Tools:
    """Tools used by the scenarios; approvals go through the shared broker."""
    notes: dict[str, str] = {}

    async def write_note(path: str, content: str, context: ToolExecutionContext) -> str:
        """Save a text note (needs host approval)."""
        target = NOTES_ROOT / path
        request = ToolPermissionRequest(tool_name="write_note",
                                        operation=ToolOperation.CREATE_FILE,
                                        cwd=NOTES_ROOT, path=target)
        blocked = await evaluate_tool_permission(request, policy=_NeedsApproval(),
                                                 approval_callback=broker.callback,
                                                 context=context)
        if blocked is not None:
            return ToolFailure(text=blocked, error=ToolError(message=blocked, kind="denied"))
        notes[str(target)] = content
        return f"Saved {len(content)} characters to {target}."

    async def stamp(label: str, context: ToolExecutionContext) -> str:
        """Record an automatically allowed action through the broker."""
        request = ToolPermissionRequest(tool_name="stamp", operation=ToolOperation.MODIFY_FILE,
                                        cwd=NOTES_ROOT, path=NOTES_ROOT / "stamps",
                                        tool_call_id=context.tool_call_id,
                                        agent_name=context.agent_name, run_id=context.run_id)
        decision = await broker.callback(request, ToolPermissionDecision.allow())
        return f"stamp {label} ({decision.outcome})"

    async def sleep(seconds: int) -> str:
        """Sleep for a while (lets the host cancel during a tool call)."""
        await asyncio.sleep(seconds)
        return f"slept {seconds} s"

    def broken() -> str:
        """A tool that always reports failure."""
        return ToolFailure(text="broken tool failed",
                           error=ToolError(message="broken tool failed", kind="error"))

    def make_blob(size: int) -> str:
        """Return an ASCII string of exactly ``size`` characters."""
        pattern = "0123456789abcdef"
        return (pattern * (size // len(pattern) + 1))[:size]

    def make_records(size: int) -> dict[str, object]:
        """Return a nested structure of roughly ``size`` bytes of JSON."""
        return {"rows": [{"i": i, "tags": ["x", "y"], "pad": "z" * 64}
                         for i in range(max(1, size // 100))]}

    def summary(value: object) -> str:
        # Keep huge results out of the conversation history: only tool_end
        # carries the full value, the model (and llm_start) sees a summary.
        return f"{len(json.dumps(value))} bytes of JSON"

    return Tools(
        tools=[
            write_note, stamp, sleep, broken,
            Tool.from_function(make_blob, formatter=summary),
            Tool.from_function(make_records, formatter=summary),
        ],
        parallel_tool_calls=True,
    )


# --------------------------------------------------------------------------
# Factory


def create_backend() -> AgentBackend:
    """Factory for ``--app scenario_app:create_backend``."""
    config = ScenarioConfig()
    # Automatic decisions are recorded (pending + resolved) so the ``auto``
    # scenario works; interactive approvals are unaffected by this flag.
    broker = ToolApprovalBroker(record_immediate_decisions=True)
    agent = DefaultAgent(descriptor=AgentDescriptor(
        name="Scenario",
        instructions="You are a scripted test agent.",
        model=ScriptedModel(config),
        tools=build_tools(broker),
        # The library's plan tool, bound through its shim so the latest plan is
        # persisted in shim_state. No prompt text: keeps recorded lines small.
        shims=[HarnessToolsShim([plan_tool(prompt_snippet=None, prompt_guidelines=())])],
    ))
    return AgentBackend(
        agent=agent,
        approvals=broker,
        ready_metadata=lambda: {"app": "scenario", "scenarios": list(SCENARIOS)},
        config=config,
    )
