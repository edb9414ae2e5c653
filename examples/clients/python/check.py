"""The two-step check from Python (connectrpc from PyPI, generated stubs).

    AGENTLANE_BRIDGE=/path/to/agentlane-bridge python check.py [--json] -- \\
        --app demo_app:create_backend --project-dir ../../backend --python ../../../.venv/bin/python

Step 1: Ping, GetVersion (api, protocol major 1, the backend's version), one
call without the token refused as unauthenticated. Step 2: two runs of a real
conversation; the client answers the agent's approval request, allowing once
and denying once, and the tool result and final answer must reflect it.

A client must read the Prompt stream and call Approve concurrently (here: a
thread pool): the run waits for the approval, so a client that sends the
prompt and waits for the stream to end stalls on the first approval.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from connectrpc.code import Code  # noqa: E402
from connectrpc.codec import proto_binary_codec, proto_json_codec  # noqa: E402
from connectrpc.errors import ConnectError  # noqa: E402

from agentlane_bridge_v1.bridge_connect import (  # noqa: E402
    AgentServiceClientSync,
    BridgeControlServiceClientSync,
)
from agentlane_bridge_v1.bridge_pb import (  # noqa: E402
    ApproveRequest,
    GetVersionRequest,
    PingRequest,
    PromptRequest,
    ShutdownRequest,
)

DENIAL = "Denied by the Python client."


class Bridge:
    """An agentlane-bridge child process: its discovery line, its token."""

    def __init__(self, args: list[str], binary: str | None = None) -> None:
        binary = binary or os.environ.get("AGENTLANE_BRIDGE", "agentlane-bridge")
        # stdin stays open: closing it tells the bridge its launcher is gone.
        self.process = subprocess.Popen([binary, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().rstrip("\n")
        word, _, body = line.removeprefix("agentlane-bridge ").partition(" ")
        if word != "ready":
            self.process.kill()
            raise RuntimeError(f"agentlane-bridge did not start: {line}")
        self.info = json.loads(body)
        if self.info["schema"] != 1 or self.info["api"] != "agentlane.bridge.v1":
            raise RuntimeError(f"unknown discovery line: {line}")
        self.url = self.info["url"]
        self.headers = {"authorization": f"Bearer {Path(self.info['tokenFile']).read_text().strip()}"}

    def wait(self) -> int:
        self.process.stdin.close()
        return self.process.wait(timeout=30)


def check(bridge_args: list[str], codec_name: str = "proto", binary: str | None = None) -> dict:
    codec = proto_json_codec() if codec_name == "json" else proto_binary_codec()
    bridge = Bridge(bridge_args, binary)
    try:
        with (
            BridgeControlServiceClientSync(bridge.url, codec=codec) as control,
            AgentServiceClientSync(bridge.url, codec=codec) as agent,
            AgentServiceClientSync(bridge.url, codec=codec) as approver,
        ):
            # Step 1: the control path.
            pong = control.ping(PingRequest(), headers=bridge.headers)
            assert pong.message == "pong", pong
            version = control.get_version(GetVersionRequest(), headers=bridge.headers)
            assert version.api == "agentlane.bridge.v1", version
            assert version.protocol_version.split(".")[0] == "1", version
            backend_version = json.loads(version.ready_json)["version"]
            try:
                control.ping(PingRequest())
                raise AssertionError("a call without the token was accepted")
            except ConnectError as error:
                assert error.code == Code.UNAUTHENTICATED, error
            print(f"step 1: ok (pong; api {version.api}, protocol {version.protocol_version}, agentlane {backend_version}; no token -> unauthenticated)")

            # Step 2: the reverse direction, allowed once and denied once.
            runs = []
            with ThreadPoolExecutor(max_workers=2) as pool:
                for allowed in (True, False):
                    run = converse(agent, approver, pool, bridge.headers, allowed)
                    print(f"step 2: ok ({'allowed' if allowed else 'denied'}: tool result {json.dumps(run['tool_result'])}; final answer {json.dumps(run['final_output'])})")
                    runs.append(run)
            control.shutdown(ShutdownRequest(), headers=bridge.headers)
    finally:
        code = bridge.wait()
    assert code == 0, f"agentlane-bridge exited with {code}"
    return {"backend_version": backend_version, "runs": runs}


def converse(agent, approver, pool: ThreadPoolExecutor, headers: dict, allowed: bool) -> dict:
    answers: list[Future] = []
    tool_end = terminal = None
    for item in agent.prompt(PromptRequest(text="Please save a note: remember milk."), headers=headers):
        if item.item is None or item.item.field != "event":
            continue
        event = json.loads(item.item.value.json)
        record = event.get("event") or {}
        if record.get("type") == "tool_approval" and record["payload"]["event"]["record"]["status"] == "pending":
            request_id = record["payload"]["event"]["record"]["request_id"]
            request = ApproveRequest(id=request_id, allowed=True) if allowed else ApproveRequest(id=request_id, allowed=False, reason=DENIAL)
            # Answered on another connection while this loop keeps reading.
            answers.append(pool.submit(approver.approve, request, headers=headers))
        if record.get("type") == "tool_end":
            tool_end = record["payload"]
        if event["type"] in ("run_complete", "run_cancelled", "error"):
            terminal = event
    assert answers, "the agent asked for no approval"
    for answer in answers:
        decision = json.loads(answer.result().resolved.json)["event"]["payload"]["event"]["record"]["final_decision"]
        assert decision["outcome"] == ("allow" if allowed else "deny"), decision
    assert terminal and terminal["type"] == "run_complete", terminal
    tool_result = tool_end["result"]
    if not allowed:
        assert DENIAL in str(tool_result), tool_result
    final_output = terminal["final_output"]
    if isinstance(final_output, str) and isinstance(tool_result, str):
        assert tool_result in final_output, (final_output, tool_result)
    return {"tool_result": tool_result, "final_output": final_output}


def main(argv: list[str]) -> int:
    codec = "proto"
    if argv and argv[0] in ("--json", "--proto"):
        codec = argv.pop(0)[2:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        check(argv, codec)
    except Exception as error:  # noqa: BLE001 - report any failure as the check's result
        print(f"check: FAILED: {error!r}")
        return 1
    print("check: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
