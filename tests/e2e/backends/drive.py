"""Drive the test backends by hand, check their behaviour, record their stdout.

Usage (from the repository root):

    python3 tests/e2e/backends/drive.py [--python PY] [--record DIR] [RECIPE ...]

With no recipe names every recipe runs. Each recipe starts a fresh backend,
sends commands, waits for the expected events (failing loudly on anything
unexpected) and shuts it down. ``--record DIR`` writes the exact bytes each
backend wrote to stdout to ``DIR/<recipe>.ndjson`` (this is how
``tests/fixtures/recorded`` was produced), plus ``DIR/<recipe>.stderr`` when
the backend wrote to stderr. ``--list`` prints the recipes.

Why a separate tool: the host under test is being written at the same time,
so the backend behaviour documented in ``tests/e2e/NOTES.md`` was checked
against the real Python backend with this independent, dependency-free driver.
The driver only needs the Python standard library; the backend interpreter
(``--python``, default ``$BRIDGE_PYTHON`` or ``<repo>/.venv/bin/python``) needs
``agentlane==0.22.0``.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DEMO_DIR = REPO / "examples" / "backend"
SCENARIO = "scenario_app:create_backend"


class Backend:
    """One backend child process with a line-oriented view of its stdout."""

    def __init__(self, python: str, app: str | None, cwd: Path, script: str | None = None):
        args = [python, script] if script else [python, "-m", "agentlane_process_bridge", "--app", app]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.raw = bytearray()
        self.raw_stderr = bytearray()
        self.events: list[dict] = []
        self.stderr: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        self._cursor = 0
        self._stdout_pump = threading.Thread(target=self._pump_stdout, daemon=True)
        self._stdout_pump.start()
        self._stderr_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_pump.start()

    def _pump_stdout(self) -> None:
        pending = b""
        while chunk := os.read(self.proc.stdout.fileno(), 1 << 20):
            self.raw += chunk
            pending += chunk
            if b"\n" not in chunk:
                continue
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._lines.put((time.monotonic(), line))
        if pending:
            self._lines.put((time.monotonic(), pending))
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        for line in self.proc.stderr:
            self.raw_stderr += line
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    def send(self, command: dict | str) -> None:
        """Write one command; dicts get protocol_version "1.0" added."""
        if isinstance(command, dict):
            command = json.dumps({**command, "protocol_version": "1.0"}, ensure_ascii=False)
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict | None:
        if self._cursor < len(self.events):
            self._cursor += 1
            return self.events[self._cursor - 1]
        item = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        if item is None:
            self._lines.put(None)
            return None
        at, line = item
        event = json.loads(line)
        event["_at"] = at - self.started
        self.events.append(event)
        self._cursor += 1
        return event

    def wait(self, pred: Callable[[dict], bool], what: str, timeout: float = 20.0,
             allow: Callable[[dict], bool] | None = None) -> dict:
        """Return the next event matching ``pred``; skipped events must satisfy ``allow``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._next(deadline)
            except queue.Empty:
                raise AssertionError(f"timeout waiting for {what}") from None
            if event is None:
                raise AssertionError(f"stdout closed while waiting for {what}")
            if pred(event):
                return event
            if allow is not None and not allow(event):
                raise AssertionError(f"unexpected {brief(event)} while waiting for {what}")

    def wait_type(self, type_: str, timeout: float = 20.0, **fields) -> dict:
        """Wait for a bridge event; any non-run_event before it is an error."""
        event = self.wait(lambda e: e["type"] == type_, type_, timeout,
                          allow=lambda e: e["type"] == "run_event")
        for key, value in fields.items():
            assert event.get(key) == value, f"{type_}.{key}: {event.get(key)!r} != {value!r}"
        return event

    def wait_native(self, native: str, timeout: float = 20.0, **fields) -> dict:
        """Wait for a run_event whose native record type is ``native``.

        ``fields`` are matched against the payload (the approval record for
        ``tool_approval``, the model event for ``model_stream``), which is
        also what is returned. Only run_start/run_event lines may come first.
        """
        def inner(e: dict) -> dict:
            payload = e["event"]["payload"]
            if native == "tool_approval":
                return payload["event"]["record"]
            return payload["event"] if native == "model_stream" else payload

        def match(e: dict) -> bool:
            if e["type"] != "run_event" or e["event"]["type"] != native:
                return False
            return all(inner(e).get(k) == v for k, v in fields.items())

        return inner(self.wait(match, f"{native} {fields}", timeout,
                               allow=lambda e: e["type"] in ("run_event", "run_start")))

    def no_more_output(self, seconds: float = 0.5) -> None:
        """Assert nothing arrives on stdout for a while."""
        try:
            event = self._next(time.monotonic() + seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected output {brief(event) if event else 'EOF'}")

    def shutdown(self, expect_cancel: bool = False) -> int:
        self.send({"type": "shutdown"})
        if expect_cancel:
            self.wait_type("run_cancelled")
        self.wait_type("shutdown")
        return self.exit()

    def exit(self, timeout: float = 10.0) -> int:
        """Wait for the process to exit and for its stdout to reach EOF."""
        code = self.proc.wait(timeout)
        self._stdout_pump.join(timeout)
        return code

    def kill(self) -> None:
        """Kill the process if still running and finish reading its output."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stdout_pump.join(5)
        self._stderr_pump.join(5)


def brief(event: dict) -> str:
    if event["type"] != "run_event":
        rest = {k: v for k, v in event.items() if k not in ("protocol_version", "ts", "type", "_at")}
        return f"{event['type']} {json.dumps(rest)[:120]}"
    record = event["event"]
    payload = record["payload"]
    if record["type"] == "model_stream":
        return f"run_event model_stream/{payload['event']['kind']}"
    if record["type"] == "tool_approval":
        r = payload["event"]["record"]
        return f"run_event tool_approval {r['request_id']} {r['status']}"
    return f"run_event {record['type']}"


def text_of(events: list[dict]) -> str:
    return "".join(e["event"]["payload"]["event"]["text"] or "" for e in events
                   if e["type"] == "run_event" and e["event"]["type"] == "model_stream"
                   and e["event"]["payload"]["event"]["kind"] == "text_delta")


# ---------------------------------------------------------------------------
# Recipes. Each gets a started Backend, drives it, and returns its exit code.

RECIPES: dict[str, tuple[str, Callable[[Backend], int]]] = {}


def recipe(app: str = SCENARIO):
    def register(fn):
        RECIPES[fn.__name__] = (app, fn)
        return fn
    return register


def ready(b: Backend) -> dict:
    event = b.wait_type("ready", timeout=30)
    assert b.events[0] is event, "ready must be the first line"
    return event


REFUSED_AFTER_COMPLETE = 0
"""How often a prompt sent right after run_complete got "A run is already active."."""


def start_prompt(b: Backend, text: str) -> dict:
    """Send a prompt and return its run_start.

    A prompt sent the instant run_complete arrives can still be refused with
    "A run is already active." (the backend frees the run slot just after
    writing run_complete); retry it, as a host would have to.
    """
    global REFUSED_AFTER_COMPLETE
    while True:
        b.send({"type": "prompt", "text": text})
        first = b.wait(lambda e: e["type"] in ("run_start", "error"), "run_start",
                       allow=lambda e: e["type"] == "run_event")
        if first["type"] == "run_start":
            assert first["prompt"] == text.strip(), first
            return first
        assert first["message"] == "A run is already active.", first
        REFUSED_AFTER_COMPLETE += 1
        time.sleep(0.01)


def run_prompt(b: Backend, text: str) -> dict:
    """Run one prompt to completion and return its run_complete."""
    start_prompt(b, text)
    return b.wait_type("run_complete")


@recipe("demo_app:create_backend")
def demo(b: Backend) -> int:
    r = ready(b)
    assert r["metadata"] == {"app": "demo"} and r["config"] == {"model": "demo-small"}, r
    start_prompt(b, "Remember to buy milk")
    b.wait_native("model_stream", kind="text_delta")
    rec = b.wait_native("tool_approval", status="pending")
    assert rec["request_id"] == "tool-approval-1" and rec["request"]["tool_name"] == "save_note"
    b.send({"type": "approve", "id": rec["request_id"], "allowed": True})
    res = b.wait_native("tool_approval", status="resolved")
    assert res["final_decision"] == {"outcome": "allow", "reason": None}, res
    end = b.wait_native("tool_end")
    assert end["ok"] and end["result"].startswith("Saved note"), end
    done = b.wait_type("run_complete")
    assert done["final_output"] == "All done. Saved note note.txt (20 characters).", done
    b.send({"type": "configure", "patch": {"model": "demo-large"}})
    b.wait_type("config", ok=True, config={"model": "demo-large"})
    b.send({"type": "configure", "patch": {"model": "gpt-x"}})
    c = b.wait_type("config", ok=False, config={"model": "demo-large"})
    assert c["error"]["code"] == "rejected", c
    return b.shutdown()


@recipe()
def chat(b: Backend) -> int:
    ready(b)
    done = run_prompt(b, "  chat hello world  ")
    assert done["final_output"] == "Hello! This is a scripted reply. You said: chat hello world"
    assert text_of(b.events) == done["final_output"]
    assert done["turn_count"] == 1 and done["response_count"] == 1 and done["shim_state"] == {}
    return b.shutdown()


@recipe()
def unicode(b: Backend) -> int:
    ready(b)
    done = run_prompt(b, "unicode")
    assert "\u2028" in done["final_output"] and "🌍" in done["final_output"]
    assert text_of(b.events) == done["final_output"]
    return b.shutdown()


@recipe()
def reasoning(b: Backend) -> int:
    ready(b)
    start_prompt(b, "reason")
    b.wait_native("model_stream", kind="provider")
    r = b.wait_native("model_stream", kind="reasoning")
    assert r["reasoning"] == "Thinking about ", r
    done = b.wait_type("run_complete")
    assert done["final_output"] == "Reasoned answer: 42."
    return b.shutdown()


@recipe()
def approve_allow(b: Backend) -> int:
    ready(b)
    start_prompt(b, "note todo.txt buy milk")
    start = b.wait_native("tool_start")
    rec = b.wait_native("tool_approval", status="pending")
    assert rec["request_id"] == "tool-approval-1" and rec["final_decision"] is None
    assert rec["request"]["tool_call_id"] == start["tool_call"]["id"], rec
    assert rec["request"]["path"] == "/notes/todo.txt", rec
    b.send({"type": "approve", "id": "tool-approval-1", "allowed": True, "reason": "ignored"})
    res = b.wait_native("tool_approval", status="resolved")
    assert res["final_decision"] == {"outcome": "allow", "reason": None}, res
    end = b.wait_native("tool_end")
    assert end["ok"] and end["result"] == "Saved 22 characters to /notes/todo.txt.", end
    done = b.wait_type("run_complete")
    assert done["final_output"] == "Done: Saved 22 characters to /notes/todo.txt.", done
    assert done["turn_count"] == 2 and done["response_count"] == 2
    # A second decision for the same id is refused.
    b.send({"type": "approve", "id": "tool-approval-1", "allowed": True})
    b.wait_type("error", scope="command", message="No pending approval request for id tool-approval-1.")
    return b.shutdown()


@recipe()
def approve_deny(b: Backend) -> int:
    ready(b)
    start_prompt(b, "note")
    rec = b.wait_native("tool_approval", status="pending")
    b.send({"type": "approve", "id": "nope", "allowed": True})
    b.wait_type("error", scope="command", message="No pending approval request for id nope.")
    b.send({"type": "approve", "id": rec["request_id"], "allowed": False, "reason": "Not today."})
    res = b.wait_native("tool_approval", status="resolved")
    assert res["final_decision"] == {"outcome": "deny", "reason": "Not today."}, res
    end = b.wait_native("tool_end")
    assert not end["ok"] and end["error"] == {"message": "Not today.", "kind": "denied"}, end
    done = b.wait_type("run_complete")
    assert done["final_output"] == "Done: Not today.", done
    # "allowed" that is not JSON true denies, with the default reason.
    start_prompt(b, "note")
    rec = b.wait_native("tool_approval", status="pending")
    assert rec["request_id"] == "tool-approval-2"
    b.send({"type": "approve", "id": rec["request_id"], "allowed": "true"})
    res = b.wait_native("tool_approval", status="resolved")
    assert res["final_decision"] == {"outcome": "deny", "reason": "Denied by bridge client."}, res
    b.wait_type("run_complete")
    return b.shutdown()


@recipe()
def parallel(b: Backend) -> int:
    ready(b)
    start_prompt(b, "parallel")
    first = b.wait_native("tool_approval", status="pending")
    second = b.wait_native("tool_approval", status="pending")
    ids = {first["request"]["path"]: first["request_id"], second["request"]["path"]: second["request_id"]}
    assert set(ids) == {"/notes/a.txt", "/notes/b.txt"}, ids
    # Answer out of order: b.txt (the later one) first.
    b.send({"type": "approve", "id": second["request_id"], "allowed": True})
    r = b.wait_native("tool_approval", status="resolved")
    assert r["request_id"] == second["request_id"]
    b.send({"type": "approve", "id": first["request_id"], "allowed": False})
    r = b.wait_native("tool_approval", status="resolved")
    assert r["request_id"] == first["request_id"]
    done = b.wait_type("run_complete")
    ends = {e["event"]["payload"]["tool_call"]["id"]: e["event"]["payload"]["ok"]
            for e in b.events if e["type"] == "run_event" and e["event"]["type"] == "tool_end"}
    assert sorted(ends.values()) == [False, True], ends
    assert done["final_output"] == ("Results: Denied by bridge client. | "
                                    "Saved 6 characters to /notes/b.txt."), done
    return b.shutdown()


@recipe()
def auto_approval(b: Backend) -> int:
    ready(b)
    start_prompt(b, "auto")
    p = b.wait_native("tool_approval", status="pending")
    assert p["approval_required_decision"]["outcome"] == "allow", p
    r = b.wait_native("tool_approval", status="resolved")
    assert r["request_id"] == p["request_id"]
    done = b.wait_type("run_complete")
    assert done["final_output"] == "Stamped: stamp auto (allow)", done
    b.send({"type": "approve", "id": p["request_id"], "allowed": True})
    b.wait_type("error", scope="command")
    return b.shutdown()


@recipe()
def plan(b: Backend) -> int:
    ready(b)
    start_prompt(b, "plan")
    p1 = b.wait_native("plan_updated")
    assert [s["status"] for s in p1["plan"]] == ["in_progress", "pending", "pending"], p1
    assert p1["explanation"] == "Starting the work."
    p2 = b.wait_native("plan_updated")
    assert p2["explanation"] is None and all(s["status"] == "completed" for s in p2["plan"])
    done = b.wait_type("run_complete")
    assert done["shim_state"]["harness-tools:plan"]["plan"] == p2["plan"], done
    return b.shutdown()


@recipe()
def cancel_streaming(b: Backend) -> int:
    ready(b)
    start_prompt(b, "slow 30")
    b.wait_native("model_stream", kind="text_delta")
    b.send({"type": "prompt", "text": "again"})
    b.wait_type("error", scope="command", message="A run is already active.")
    b.send({"type": "cancel"})
    b.wait_type("cancel_requested")
    b.wait_type("run_cancelled")
    b.send({"type": "cancel"})
    b.wait_type("cancel_ignored", reason="no active run")
    done = run_prompt(b, "chat after cancel")
    assert done["final_output"].endswith("chat after cancel")
    return b.shutdown()


@recipe()
def cancel_twice(b: Backend) -> int:
    """Two cancels written together.

    Observed: cancel_requested, run_cancelled, then cancel_ignored "no active
    run" (never "cancellation already in progress"); either order is accepted.
    """
    ready(b)
    start_prompt(b, "slowtool 30")
    b.wait_native("tool_start")
    b.send({"type": "cancel"})
    b.send({"type": "cancel"})
    b.wait_type("cancel_requested")
    second = b.wait(lambda e: e["type"] in ("cancel_ignored", "run_cancelled"), "second cancel")
    ignored = b.wait_type("cancel_ignored") if second["type"] == "run_cancelled" else second
    assert ignored["reason"] in ("no active run", "cancellation already in progress"), ignored
    if second["type"] == "cancel_ignored":
        b.wait_type("run_cancelled")
    return b.shutdown()


@recipe()
def cancel_pending_approval(b: Backend) -> int:
    ready(b)
    start_prompt(b, "note")
    rec = b.wait_native("tool_approval", status="pending")
    b.send({"type": "cancel"})
    b.wait_type("cancel_requested")
    b.wait_type("run_cancelled")
    b.send({"type": "approve", "id": rec["request_id"], "allowed": True})
    b.wait_type("error", scope="command", message=f"No pending approval request for id {rec['request_id']}.")
    return b.shutdown()


@recipe()
def reset_mid_run(b: Backend) -> int:
    ready(b)
    assert run_prompt(b, "count")["final_output"] == "This conversation has 1 user message(s)."
    assert run_prompt(b, "count")["final_output"] == "This conversation has 2 user message(s)."
    b.send({"type": "configure", "patch": {"model": "m2"}})
    b.wait_type("config", ok=True)
    start_prompt(b, "slow 30")
    b.wait_native("model_stream", kind="text_delta")
    b.send({"type": "reset"})
    b.wait_type("run_cancelled")
    b.wait_type("reset", config={"model": "m2"})
    assert run_prompt(b, "count")["final_output"] == "This conversation has 1 user message(s)."
    return b.shutdown()


@recipe()
def reset_pending_approval(b: Backend) -> int:
    ready(b)
    start_prompt(b, "note")
    b.wait_native("tool_approval", status="pending")
    b.send({"type": "reset"})
    b.wait_type("run_cancelled")
    b.wait_type("reset", config={"model": "scripted-1"})
    b.send({"type": "reset"})
    b.wait_type("reset")
    return b.shutdown()


@recipe()
def shutdown_mid_run(b: Backend) -> int:
    ready(b)
    start_prompt(b, "slow 30")
    b.wait_native("model_stream", kind="text_delta")
    return b.shutdown(expect_cancel=True)


@recipe()
def shutdown_pending_approval(b: Backend) -> int:
    ready(b)
    start_prompt(b, "parallel")
    b.wait_native("tool_approval", status="pending")
    b.wait_native("tool_approval", status="pending")
    return b.shutdown(expect_cancel=True)


@recipe()
def eof_mid_run(b: Backend) -> int:
    ready(b)
    start_prompt(b, "slow 30")
    b.wait_native("model_stream", kind="text_delta")
    b.proc.stdin.close()
    code = b.exit()
    leftovers = [e["type"] for e in b.events if e["type"] != "run_event"]
    assert leftovers == ["ready", "run_start"], leftovers
    return code


@recipe()
def configure(b: Backend) -> int:
    r = ready(b)
    assert r["config"] == {"model": "scripted-1"}
    b.send({"type": "configure", "patch": {}})
    b.wait_type("config", ok=True, error=None, config={"model": "scripted-1"})
    b.send({"type": "configure", "patch": {"model": "scripted-2"}})
    b.wait_type("config", ok=True, error=None, config={"model": "scripted-2"})
    b.send({"type": "configure", "patch": {"temperature": 1}})
    b.wait_type("config", ok=False, config={"model": "scripted-2"},
                error={"code": "rejected", "message": "Unknown config key: temperature."})
    b.send({"type": "configure", "patch": {"model": ""}})
    b.wait_type("config", ok=False, error={"code": "rejected", "message": "model must be a non-empty string."})
    b.send({"type": "configure", "patch": {"crash": True}})
    b.wait_type("config", ok=False, config={"model": "scripted-2"},
                error={"code": "internal", "message": "Runtime configuration failed inside the backend."})
    b.send({"type": "configure", "patch": [1]})
    b.wait_type("config", ok=False, config={"model": "scripted-2"},
                error={"code": "invalid", "message": "Configure command patch must be a JSON object."})
    b.send({"type": "configure"})
    b.wait_type("config", ok=False, error={"code": "invalid", "message": "Configure command patch must be a JSON object."})
    # During a run: the config event is interleaved with run events.
    start_prompt(b, "slow 1")
    b.wait_native("model_stream", kind="text_delta")
    b.send({"type": "configure", "patch": {"model": "scripted-3"}})
    b.wait_type("config", ok=True, config={"model": "scripted-3"})
    done = b.wait_type("run_complete")
    assert done["final_output"].startswith("tick 1 ")
    b.send({"type": "reset"})
    b.wait_type("reset", config={"model": "scripted-3"})
    done = run_prompt(b, "chat")
    llm_end = [e for e in b.events if e["type"] == "run_event" and e["event"]["type"] == "llm_end"][-1]
    assert llm_end["event"]["payload"]["response"]["model"] == "scripted-3"
    return b.shutdown()


@recipe()
def run_failure(b: Backend) -> int:
    ready(b)
    start_prompt(b, "fail")
    err = b.wait_native("model_stream", kind="error")
    assert err["error"] == {"type": "RuntimeError", "message": "Scripted model failure."}, err
    b.wait_type("error", scope="run", message="Scripted model failure.")
    done = run_prompt(b, "chat still alive")
    assert done["final_output"].endswith("still alive")
    return b.shutdown()


@recipe()
def tool_failure(b: Backend) -> int:
    ready(b)
    start_prompt(b, "toolfail")
    end = b.wait_native("tool_end")
    assert end["ok"] is False and end["error"] == {"message": "broken tool failed", "kind": "error"}, end
    assert end["result"] == "broken tool failed"
    done = b.wait_type("run_complete")
    assert done["final_output"] == "The tool failed: broken tool failed"
    return b.shutdown()


def _big(b: Backend, size: int, keyword: str = "big") -> int:
    ready(b)
    start_prompt(b, f"{keyword} {size}")
    end = b.wait_native("tool_end", timeout=120)
    if keyword == "big":
        assert isinstance(end["result"], str) and len(end["result"]) == size
    else:
        assert isinstance(end["result"], dict) and len(end["result"]["rows"]) == size // 100
    b.wait_type("run_complete", timeout=120)
    return b.shutdown()


@recipe()
def big_result(b: Backend) -> int:
    return _big(b, 2000)


@recipe()
def big_json_result(b: Backend) -> int:
    return _big(b, 2000, "bigjson")


@recipe()
def huge_result(b: Backend) -> int:
    """20 MB tool result (not recorded as a fixture: too big)."""
    started = time.monotonic()
    code = _big(b, 20_000_000)
    line = max(b.raw.split(b"\n"), key=len)
    print(f"    longest line {len(line)} bytes; run took {time.monotonic() - started:.2f}s")
    return code


@recipe()
def cancel_vs_complete(b: Backend) -> int:
    """Cancel at varying points near the end of short runs (not recorded)."""
    ready(b)
    outcomes: dict[str, int] = {}
    for i in range(150):
        if i % 50 == 0:  # stay below the 128-turn conversation limit
            b.send({"type": "reset"})
            b.wait_type("reset")
        start_prompt(b, "chat x")
        time.sleep((i % 30) * 0.0025)  # a run takes ~55 ms
        b.send({"type": "cancel"})
        seen: list[str] = []
        while not ({"run_complete", "run_cancelled"} & set(seen)
                   and {"cancel_requested", "cancel_ignored"} & set(seen)):
            seen.append(b.wait(lambda e: e["type"] != "run_event", "terminal + cancel answer")["type"])
        assert len(seen) == 2, seen
        outcomes[" -> ".join(seen)] = outcomes.get(" -> ".join(seen), 0) + 1
    print("    " + "; ".join(f"{n}x {k}" for k, n in sorted(outcomes.items())))
    return b.shutdown()


@recipe()
def turn_limit(b: Backend) -> int:
    """The runner's 128-turn cap counts the whole conversation (not recorded)."""
    ready(b)
    for i in range(64):  # "auto" takes two model turns
        done = run_prompt(b, "auto")
    assert done["turn_count"] == 128, done
    start_prompt(b, "chat")
    b.wait_type("error", scope="run", message="Runner exceeded the configured turn limit of 128.")
    b.send({"type": "reset"})
    b.wait_type("reset")
    assert run_prompt(b, "chat")["turn_count"] == 1
    return b.shutdown()


@recipe()
def command_errors(b: Backend) -> int:
    ready(b)
    cases = [
        ("not json", "Invalid JSON command."),
        ("", "Invalid JSON command."),
        ("[1,2]", "Command must be a JSON object."),
        ('{"protocol_version":"1.0"}', "Command is missing a string type."),
        ('{"type":"prompt","text":"x"}', "Unsupported protocol version: None"),
        ('{"protocol_version":"2.0","type":"prompt","text":"x"}', "Unsupported protocol version: 2.0"),
        ('{"protocol_version":"1.0","type":"bogus"}', "Unknown command: bogus"),
        ('{"protocol_version":"1.0","type":"prompt","text":"   "}', "Prompt must not be empty."),
        ('{"protocol_version":"1.0","type":"prompt"}', "Prompt must not be empty."),
        ("x" * 1_000_000, "Command line exceeds bridge size limit."),
    ]
    for line, message in cases:
        b.send(line)
        b.wait_type("error", scope="command", message=message)
    b.send('{"protocol_version":" 01.0","type":"cancel"}')
    b.wait_type("cancel_ignored", reason="no active run")
    return b.shutdown()


@recipe("dies_midline.py")
def dies_midline(b: Backend) -> int:
    ready(b)
    code = b.exit()
    assert b.raw.count(b"\n") == 1 and not b.raw.endswith(b"\n"), bytes(b.raw[-80:])
    assert code == 3, code
    return code


@recipe("ignores_shutdown.py")
def ignores_shutdown(b: Backend) -> int:
    ready(b)
    b.send({"type": "shutdown"})
    b.no_more_output(1.0)
    assert b.proc.poll() is None, "should still be running"
    b.proc.terminate()
    time.sleep(0.5)
    assert b.proc.poll() is None, "should ignore SIGTERM"
    b.proc.kill()
    return b.proc.wait()


NOT_RECORDED = {"huge_result", "cancel_vs_complete", "turn_limit"}
"""Recipes whose output is too big (or too random) for a fixture."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_python = os.environ.get("BRIDGE_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    parser.add_argument("--python", default=default_python)
    parser.add_argument("--record", type=Path, help="write raw stdout to DIR/<recipe>.ndjson")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--stderr", action="store_true", help="print each backend's stderr")
    parser.add_argument("recipes", nargs="*")
    args = parser.parse_args()
    if os.sep in args.python:  # backends run in other cwds; keep venv symlinks intact
        args.python = os.path.abspath(args.python)
    if args.list:
        print("\n".join(RECIPES))
        return 0

    failures = 0
    for name in args.recipes or list(RECIPES):
        app, fn = RECIPES[name]
        script = app if app.endswith(".py") else None
        cwd = DEMO_DIR if app.startswith("demo_app") else HERE
        b = Backend(args.python, None if script else app, cwd, script=script)
        try:
            code = fn(b)
            if script is None:
                assert code == 0, f"exit status {code}"
            status = "ok"
        except Exception as exc:  # report and continue with the next recipe
            status = f"FAIL: {type(exc).__name__}: {exc}"
            failures += 1
        finally:
            b.kill()
        ready_at = next((e["_at"] for e in b.events if e["type"] == "ready"), float("nan"))
        print(f"{name:28} {status}  ready {ready_at:.2f}s, total {time.monotonic() - b.started:.2f}s, "
              f"{len(b.events)} lines, {len(b.raw)} bytes")
        if (status != "ok" or args.stderr) and b.stderr:
            shown = b.stderr if args.stderr else b.stderr[-15:]
            print("    stderr: " + "\n    stderr: ".join(shown))
        if args.record and name not in NOT_RECORDED:
            args.record.mkdir(parents=True, exist_ok=True)
            (args.record / f"{name}.ndjson").write_bytes(bytes(b.raw))
            if 0 < len(b.raw_stderr) <= 50_000:  # run_failure's traceback is ~70 KB
                (args.record / f"{name}.stderr").write_bytes(bytes(b.raw_stderr))
    if REFUSED_AFTER_COMPLETE:
        print(f"note: {REFUSED_AFTER_COMPLETE} prompt(s) sent right after run_complete were refused"
              " with 'A run is already active.' and retried")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
