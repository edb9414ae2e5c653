"""agentlane's ``StateStore`` whose operations go to the host.

agentlane calls a store synchronously, on the event loop's thread: ``load``
when the agent is built, ``save`` after each successful run, ``delete`` on
reset. Each operation here waits for the host's answer on a future the
channel's reader thread resolves (never the loop), with a time limit, so a
slow or gone host cannot hang the backend.
"""

from typing import Literal

from agentlane.harness import AgentSnapshot, StateStore
from pydantic import BaseModel, ValidationError

from ._connection import Connection, Decoder, Reply
from ._errors import HostChannelError, RevisionConflictError
from ._protocol import REVISION_CONFLICT, TIMEOUT


class _Loaded(BaseModel):
    """``store_load``'s value, ``{"snapshot": <AgentSnapshot> | null}``."""

    snapshot: AgentSnapshot | None


class _LoadResult(BaseModel):
    """The host's whole result line for a ``store_load``.

    Read by pydantic straight from the line's bytes: one pass, where
    ``json.loads`` and then ``AgentSnapshot.from_json`` on its objects read
    a large snapshot twice (issue 33: in a warm fork, 1,000 turns 23 -> 16
    ms). Built at import (about 2 ms), so that a prefork server's
    conversations inherit it built.
    """

    type: Literal["result"]
    id: str
    value: _Loaded


def _decode_load(line: bytes, request_id: str) -> Reply | None:
    """A valid load result in one pass; ``None`` leaves the line to the
    general path, which reports what is wrong with it as before."""
    try:
        result = _LoadResult.model_validate_json(line)
    except ValidationError:
        return None
    if result.id != request_id:
        return None
    return Reply(ok=True, value=result.value)


class HostStateStore(StateStore):
    """The conversation's committed snapshots, kept by the host.

    Made by ``host.state_store()``; pass it as ``DefaultAgent(state_store=...)``.
    A revision conflict raises ``RevisionConflictError`` (a ``ValueError``,
    as agentlane's file store raises); any other failure (the host's store
    failed, its time limit or this one passed, the channel was lost) raises
    ``HostChannelError`` with its ``kind``. agentlane then fails the run
    (save) or the build of the agent (load); nothing is committed.
    """

    def __init__(self, connection: Connection, *, timeout: float) -> None:
        self._connection = connection
        self._timeout = timeout

    def load(self) -> AgentSnapshot | None:
        value = self._call("store_load", "load", decode=_decode_load)
        if isinstance(value, _Loaded):
            return value.snapshot
        if not isinstance(value, dict) or "snapshot" not in value:
            raise HostChannelError(
                "invalid-result", "The host's store answered load without a snapshot."
            )
        snapshot = value["snapshot"]
        if snapshot is None:
            return None
        try:
            return AgentSnapshot.from_json(snapshot)
        except ValidationError as error:
            raise HostChannelError(
                "invalid-result",
                f"The host's store holds no agentlane snapshot: {error}",
            ) from error

    def save(
        self,
        snapshot: AgentSnapshot,
        *,
        expected_revision: int | None,
    ) -> None:
        self._call(
            "store_save",
            "save",
            snapshot=snapshot.to_json(),
            expected_revision=expected_revision,
        )

    def delete(self, *, expected_revision: int | None) -> None:
        self._call("store_delete", "delete", expected_revision=expected_revision)

    def _call(
        self,
        type_: str,
        operation: str,
        *,
        decode: Decoder | None = None,
        **fields: object,
    ) -> object:
        if decode is None:
            request_id, future = self._connection.request(type_, **fields)
        else:
            request_id, future = self._connection.request_decoded(
                type_, decode, **fields
            )
        try:
            reply = future.result(timeout=self._timeout)
        except TimeoutError:
            self._connection.cancel(request_id)
            raise HostChannelError(
                TIMEOUT,
                f"The host's store did not answer {operation} within {self._timeout} s.",
            ) from None
        if reply.ok:
            return reply.value
        if reply.kind == REVISION_CONFLICT:
            raise RevisionConflictError(reply.message)
        raise HostChannelError(
            reply.kind, f"The host's store failed to {operation}: {reply.message}"
        )
