// Summarizes V8 .cpuprofile files (from node --cpu-prof): self time per
// function, heaviest first.
//
//   node bench/stream/cpuprofile-summary.mjs FILE.cpuprofile [TOP]
import { readFileSync } from "node:fs";

const [file, topArg = "25"] = process.argv.slice(2);
const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfUs = new Map();
let total = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const node = byId.get(profile.samples[i]);
  const dt = profile.timeDeltas[i] ?? 0;
  const { functionName, url, lineNumber } = node.callFrame;
  const key = `${functionName || "(anonymous)"} ${url ? `${url.replace(/^.*\/(?=[^/]+\/[^/]+$)/, "")}:${lineNumber + 1}` : ""}`;
  selfUs.set(key, (selfUs.get(key) ?? 0) + dt);
  total += dt;
}
console.log(`total sampled: ${(total / 1e3).toFixed(1)} ms`);
for (const [key, us] of [...selfUs].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg))) {
  console.log(`${(us / 1e3).toFixed(1).padStart(9)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${key}`);
}
