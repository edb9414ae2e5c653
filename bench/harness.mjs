// Side-by-side timing for noisy 2-core machines: every round runs each
// contender once on the same input, in rotating order, and the reported
// ratio is the median over rounds of the within-round ratio.

const now = () => process.hrtime.bigint();

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * @param contenders {[name, (line) => unknown][]} the first is the reference (ratio 1)
 * @param lines the input; each round decodes every line once per contender
 * @returns rows of {name, perEventNs, ratio}
 */
export function compare(contenders, lines, { rounds = 15, warmup = 3 } = {}) {
  const times = contenders.map(() => []);
  for (let round = -warmup; round < rounds; round++) {
    const order = contenders.map((_, i) => i);
    for (let k = 0; k < ((round + warmup) % contenders.length); k++) order.push(order.shift());
    const roundTimes = [];
    for (const i of order) {
      const decode = contenders[i][1];
      globalThis.gc?.();
      const start = now();
      for (let j = 0; j < lines.length; j++) decode(lines[j]);
      roundTimes[i] = Number(now() - start);
    }
    if (round >= 0) roundTimes.forEach((t, i) => times[i].push(t));
  }
  const reference = times[0];
  return contenders.map(([name], i) => ({
    name,
    perEventNs: median(times[i]) / lines.length,
    ratio: median(times[i].map((t, r) => t / reference[r])),
  }));
}

export function formatNs(ns) {
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${ns.toFixed(0)} ns`;
}
