"""The host's tools as agentlane tools, added to every model turn by a shim.

Each tool is built from the host's name, description and raw JSON Schema,
the way agentlane's own MCP adapter builds a schema-only tool: an
arguments model that allows any field, the schema as ``parameters_schema``,
``strict=False`` (the host's schema is passed as written), no retry on
timeout (a call may have side effects in the application). The host
validates the arguments against the schema.
"""

import asyncio
from copy import deepcopy
from typing import Any

from agentlane.harness.shims import PreparedTurn, Shim
from agentlane.models import Tool, ToolError, ToolExecutionContext, ToolFailure
from agentlane.runtime import CancellationToken
from pydantic import BaseModel, ConfigDict

from ._connection import Connection
from ._errors import HostChannelError
from ._protocol import TIMEOUT


class _HostArguments(BaseModel):
    """Any JSON object: the host judges the arguments against its schema."""

    model_config = ConfigDict(extra="allow")


class HostToolsShim(Shim):
    """Adds the host's tools to every model turn of the agent it is given to.

    Made by ``host.tools()``; put it in the agent descriptor's ``shims``.
    """

    def __init__(self, tools: tuple[Tool[_HostArguments, object], ...]) -> None:
        self._tools = tools

    @property
    def name(self) -> str:
        return "host-tools"

    @property
    def tools(self) -> tuple[Tool[_HostArguments, object], ...]:
        """The host's tools, as the model sees them."""
        return self._tools

    async def prepare_turn(self, turn: PreparedTurn) -> None:
        if self._tools:
            turn.add_tools(self._tools, require_unique_names=True)


def tools_of(
    connection: Connection, listed: object, call_timeout: float | None
) -> tuple[Tool[_HostArguments, object], ...]:
    """The tools of the host's ``list_tools`` answer."""
    entries = listed.get("tools") if isinstance(listed, dict) else None
    if not isinstance(entries, list):
        raise HostChannelError(
            "invalid-result", "The host's tool list has no `tools` array."
        )
    tools: list[Tool[_HostArguments, object]] = []
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        description = entry.get("description") if isinstance(entry, dict) else None
        schema = entry.get("input_schema") if isinstance(entry, dict) else None
        if not (
            isinstance(name, str)
            and name
            and isinstance(description, str)
            and isinstance(schema, dict)
        ):
            raise HostChannelError(
                "invalid-result",
                f"The host's tool {index} needs a name, a description and an "
                "input_schema object.",
            )
        tools.append(_host_tool(connection, name, description, schema, call_timeout))
    return tuple(tools)


def _host_tool(
    connection: Connection,
    name: str,
    description: str,
    schema: dict[str, Any],
    call_timeout: float | None,
) -> Tool[_HostArguments, object]:
    async def handler(
        args: _HostArguments,
        cancellation_token: CancellationToken,
        context: ToolExecutionContext,
    ) -> object:
        del cancellation_token  # the run's cancel arrives as CancelledError
        return await _call(connection, name, args.model_dump(), context, call_timeout)

    return Tool(
        name=name,
        description=description,
        args_model=_HostArguments,
        handler=handler,
        parameters_schema=deepcopy(schema),
        strict=False,
        retry_on_timeout=False,
    )


async def _call(
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    context: ToolExecutionContext,
    call_timeout: float | None,
) -> object:
    """One call of a host tool: its value, or a ``ToolFailure`` with a kind.

    Never raises but ``CancelledError`` (the run's cancel, which the host is
    told of): a host error, a timeout or a lost channel is the model's to
    read, and the run goes on.
    """
    request_id, future = connection.request(
        "call_tool",
        name=name,
        arguments=arguments,
        tool_call_id=context.tool_call_id,
        run_id=context.run_id,
    )
    try:
        reply = await asyncio.wait_for(asyncio.wrap_future(future), call_timeout)
    except TimeoutError:
        connection.cancel(request_id)
        return _failure(TIMEOUT, f"The host did not answer {name} within {call_timeout} s.")
    except asyncio.CancelledError:
        connection.cancel(request_id)
        raise
    if reply.ok:
        return reply.value
    return _failure(reply.kind, reply.message)


def _failure(kind: str, message: str) -> ToolFailure:
    return ToolFailure(text=message, error=ToolError(message=message, kind=kind))
