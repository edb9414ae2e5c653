/**
 * The session's error classes. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { AgentSessionError, BridgeDecodeError, ConfigureError, createAgentSession, RunError, SessionClosedError, SessionStartError, SessionStateError, type SessionClose } from "../../lib/index";
import { Harness } from "./harness";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("error classes (§9.5.3)", () => {
  it("SessionStartError, RunError and SessionStateError carry name and message", () => {
    for (const [Class, name] of [
      [SessionStartError, "SessionStartError"],
      [RunError, "RunError"],
      [SessionStateError, "SessionStateError"],
    ] as const) {
      const error = new Class("boom");
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(name);
      expect(error.message).toBe("boom");
    }
  });

  it("SessionClosedError: message from the close reason, `close` property", () => {
    const decode = new BridgeDecodeError("bad", ["type"]);
    for (const close of [
      { reason: "shutdown", code: 0, signal: null },
      { reason: "exit", code: null, signal: "SIGKILL" },
      { reason: "protocol-error", error: decode, code: null, signal: null },
    ] as SessionClose[]) {
      const error = new SessionClosedError(close);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe("SessionClosedError");
      expect(error.message).toBe(`Agent session closed: ${close.reason}`);
      expect(error.close).toBe(close);
    }
  });

  it("ConfigureError: `code` property and message", () => {
    const error = new ConfigureError("rejected", "Unknown model.");
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ConfigureError");
    expect(error.code).toBe("rejected");
    expect(error.message).toBe("Unknown model.");
  });
});

//

describe("one base class and stable codes", () => {
  it("every session error is an AgentSessionError with a code; SessionClosedError keeps a protocol error as cause", () => {
    const decode = new BridgeDecodeError("bad", ["type"], { code: "invalid-payload" });
    const errors = [
      [new SessionStartError("m", "ready-timeout"), "ready-timeout"],
      [new RunError("m", "command-refused"), "command-refused"],
      [new SessionStateError("m", "run-active"), "run-active"],
      [new ConfigureError("rejected", "m"), "rejected"],
      [new SessionClosedError({ reason: "exit", code: 1, signal: null }), "session-closed"],
    ] as const;
    for (const [error, code] of errors) {
      expect(error).toBeInstanceOf(AgentSessionError);
      expect(error.code).toBe(code);
    }
    expect(new SessionClosedError({ reason: "protocol-error", error: decode, code: null, signal: null }).cause).toBe(decode);
    expect(new SessionClosedError({ reason: "shutdown", code: 0, signal: null }).cause).toBeUndefined();
  });
});
