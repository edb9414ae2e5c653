// Run by limits.mjs under Deno with some permissions withheld: what the
// package says when the runtime refuses it, as one JSON line
// ({load} when the import failed, else {spawn, session}).
const describe = (error) => ({ name: error?.name, code: error?.code, permission: error?.permission, reason: error?.reason, message: error?.message, cause: error?.cause && describe(error.cause) });
const out = {};
try {
  const api = await import("@agentlanejs/process-bridge-native");
  try {
    const child = api.spawnBridgeProcess({ command: "/bin/true" }, { onEvent() {}, onSpawnError: (error) => (out.spawnError = describe(error)) });
    out.spawn = child.pid === undefined ? "no pid" : "started";
  } catch (error) {
    out.spawn = describe(error);
  }
  try {
    const session = await api.createAgentSession({ backend: { command: "/bin/true" } });
    await session.close();
    out.session = "started";
  } catch (error) {
    out.session = describe(error);
  }
} catch (error) {
  out.load = describe(error);
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
