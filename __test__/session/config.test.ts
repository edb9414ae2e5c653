/**
 * configure() and the config cache. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { BridgeDecodeError, ConfigureError, createAgentSession, SessionClosedError, type SessionClose } from "../../lib/index";
import { ev, flushMicrotasks, Harness, observe, STUBBORN, within } from "./harness";
import { x, startRun, barrier, expectClosedError } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("configure() and the config cache (§9.5.4)", () => {
  it("ok: resolves with the decoded document, updates the cache, calls onConfigChanged; the patch is a shallow copy", async () => {
    const l = await h.launch(
      { start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] },
      { decodeConfig: (raw: Record<string, unknown>) => ({ ...raw, decoded: true }) },
    );
    const patch = { model: "gpt-b", limits: { tokens: 5 } };
    const configure = observe(l.session.configure(patch));
    const received = await l.fake.next();
    expect(received.line).toBe('{"type":"configure","patch":{"model":"gpt-b","limits":{"tokens":5}},"protocol_version":"1.0"}');
    expect(patch).toEqual({ model: "gpt-b", limits: { tokens: 5 } });
    expect(l.session.config).toEqual({ model: "gpt-a", decoded: true }); // never predicted from the patch
    l.fake.emit(ev.configOk({ model: "gpt-b", temperature: 0 }));
    expect(await configure.value()).toEqual({ model: "gpt-b", temperature: 0, decoded: true });
    expect(l.session.config).toEqual({ model: "gpt-b", temperature: 0, decoded: true });
    expect(l.rec.of("configChanged").map((e) => e.config)).toEqual([{ model: "gpt-b", temperature: 0, decoded: true }]);
  });

  it("a top-level undefined value rejects locally with ConfigureError('invalid', …) and sends nothing", async () => {
    const l = await h.launch();
    const error = await observe(l.session.configure({ ok: 1, model: undefined })).error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).name).toBe("ConfigureError");
    expect((error as ConfigureError).code).toBe("invalid");
    expect((error as ConfigureError).message).toBe("Configure patch value must not be undefined: model.");
    await barrier(l);
  });

  it("failed with a snapshot: the cache is updated and onConfigChanged fires before configure() rejects", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    const configure = observe(l.session.configure({ model: "nope" }));
    void configure.settled.then(() => l.rec.note("configure settled"));
    await l.fake.expect("configure");
    l.fake.emit(ev.configFailed("rejected", "Unknown model.", { model: "gpt-a", epoch: 2 }));
    const error = await configure.error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).code).toBe("rejected");
    expect((error as ConfigureError).message).toBe("Unknown model.");
    expect(l.session.config).toEqual({ model: "gpt-a", epoch: 2 });
    expect(l.rec.trace().slice(-3)).toEqual(["event config", 'configChanged {"model":"gpt-a","epoch":2}', "configure settled"]);
  });

  it("failed without a document: ConfigureError(code, message) for every code; cache unchanged, no onConfigChanged", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    for (const [code, message] of [
      ["unsupported", "Runtime configuration is not supported by this backend."],
      ["invalid", "Configure command patch must be a JSON object."],
      ["internal", "Runtime configuration failed inside the backend."],
      ["rejected", "Runtime configuration was rejected."],
    ]) {
      const configure = observe(l.session.configure({ model: "x" }));
      await l.fake.expect("configure");
      l.fake.emit(ev.configFailed(code, message, null));
      const error = await configure.error();
      expect(error).toBeInstanceOf(ConfigureError);
      expect((error as ConfigureError).code).toBe(code);
      expect((error as ConfigureError).message).toBe(message);
    }
    expect(l.session.config).toEqual({ model: "gpt-a" });
    expect(l.rec.of("configChanged")).toEqual([]);
  });

  it("a command error attributed to configure rejects with ConfigureError('unsupported', message)", async () => {
    const l = await h.launch();
    const configure = observe(l.session.configure({ model: "x" }));
    await l.fake.expect("configure");
    l.fake.emit(ev.commandError("Unknown command: configure"));
    const error = await configure.error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).code).toBe("unsupported");
    expect((error as ConfigureError).message).toBe("Unknown command: configure");
  });

  it("settlement always takes the oldest pending configure", async () => {
    const l = await h.launch();
    const first = observe(l.session.configure({ v: 1 }));
    const second = observe(l.session.configure({ v: 2 }));
    await l.fake.expect("configure");
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ v: 1 }), ev.configFailed("rejected", "v2 refused", { v: 1 }));
    expect(await first.value()).toEqual({ v: 1 });
    expect(((await second.error()) as ConfigureError).message).toBe("v2 refused");
    expect(l.rec.of("configChanged").map((e) => e.config)).toEqual([{ v: 1 }, { v: 1 }]);
  });

  it("a config event with no pending configure: protocol-error close (fields ['type']), SIGKILL, pending run rejects", async () => {
    const l = await h.launch(STUBBORN);
    const run = await startRun(l);
    l.fake.emit(ev.configOk({ model: "surprise" }));
    await l.rec.waitClose();
    const [close] = l.rec.of("close").map((e) => e.close);
    expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
    expect(close.error).toBeInstanceOf(BridgeDecodeError);
    expect(close.error.message).toBe("Unexpected config event without pending configure.");
    expect(close.error.fields).toEqual(["type"]);
    expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: close.error, line: "" }]);
    expect(l.session.config).toBeUndefined();
    expectClosedError(await run.error(), close as SessionClose);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it.each([
    ["ok: true", ev.configOk({ bad: true })],
    ["ok: false with a snapshot", ev.configFailed("rejected", "no", { bad: true })],
  ])(
    "regression: a config document (%s) that decodeConfig rejects: protocol-error close + SIGKILL, and the pending configure() rejects with SessionClosedError",
    async (_label, event) => {
      const l = await h.launch(STUBBORN, {
        decodeConfig: (raw: Record<string, unknown>) => {
          if (raw.bad) throw new Error("bad doc");
          return raw;
        },
      });
      const configure = observe(l.session.configure({ x: 1 }));
      await l.fake.expect("configure");
      l.fake.emit(event);
      await l.rec.waitClose();
      const [close] = l.rec.of("close").map((e) => e.close);
      expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
      expect(close.error.message).toBe("Invalid runtime config document: bad doc");
      expect(close.error.fields).toEqual(["config"]);
      expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: close.error, line: "" }]);
      expect(l.rec.of("configChanged")).toEqual([]);
      expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
      // Teardown step 3: every pending command operation rejects. Teardown
      // ran synchronously before onClose, so the promise must have settled.
      await flushMicrotasks();
      expect(configure.state.status).toBe("rejected");
      expectClosedError((configure.state as { error: unknown }).error, close as SessionClose);
    },
  );
});

//

describe("configure() refuses what JSON cannot carry (regression: it sent a copy that had changed)", () => {
  it("non-plain patches and values JSON cannot carry reject with ConfigureError('invalid'), naming the place; nothing is sent", async () => {
    const l = await h.launch();
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const cases: [unknown, string][] = [
      ["ab", "Configure patch must be a plain JSON object, not a string."],
      [[1, 2], "Configure patch must be a plain JSON object, not an array."],
      [new Map([["model", "x"]]), "Configure patch must be a plain JSON object, not a Map."],
      [null, "Configure patch must be a plain JSON object, not null."],
      [{ nested: { value: undefined } }, "Configure patch value at nested.value is not JSON: undefined."],
      [{ ratio: Number.NaN }, "Configure patch value at ratio is not JSON: NaN."],
      [{ limits: [1, Infinity] }, "Configure patch value at limits.1 is not JSON: Infinity."],
      [{ callback: () => 1 }, "Configure patch value at callback is not JSON: a function."],
      [{ when: new Date(0) }, "Configure patch value at when is not JSON: a Date."],
      [cyclic, "Configure patch value at self is not JSON: a circular reference."],
    ];
    for (const [patch, message] of cases) {
      const error = await observe(l.session.configure(patch as never)).error();
      expect(error, message).toBeInstanceOf(ConfigureError);
      expect([(error as ConfigureError).code, (error as ConfigureError).message]).toEqual(["invalid", message]);
    }
    await barrier(l);
  });

  it("a patch whose getter or Proxy trap throws rejects (configure() never throws); the getter is read once", async () => {
    const l = await h.launch();
    const getter = { get model(): string {
      throw new Error("getter exploded");
    } };
    let configure!: Promise<unknown>;
    expect(() => (configure = l.session.configure(getter))).not.toThrow();
    const error = await observe(configure).error();
    expect([(error as ConfigureError).code, (error as ConfigureError).message]).toEqual(["invalid", "getter exploded"]);
    const trap = new Proxy({}, { ownKeys: () => { throw new Error("trap exploded"); } });
    expect(((await observe(l.session.configure(trap)).error()) as Error).message).toBe("trap exploded");
    let reads = 0;
    const counted = { get model() { reads += 1; return `gpt-${reads}`; } };
    const done = observe(l.session.configure(counted));
    const sent = await l.fake.expect("configure");
    expect([sent.patch, reads]).toEqual([{ model: "gpt-1" }, 1]);
    l.fake.emit(ev.configOk({ model: "gpt-1" }));
    await done.value();
  });
});
