// Blocking pipe I/O for the benchmarks' child processes (writer.mjs,
// ../bridge/backend.mjs): fd 0 and fd 1 may be handed over non-blocking.
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Runs `io` until it succeeds, waiting out EAGAIN (a descriptor handed over non-blocking). */
export function blocking(io) {
  for (;;) {
    try {
      return io();
    } catch (error) {
      if (error.code !== "EAGAIN") throw error;
      Atomics.wait(sleeper, 0, 0, 1);
    }
  }
}

/** Sleeps the thread for `ms` (the writers have nothing else to do meanwhile). */
export function pause(ms) {
  Atomics.wait(sleeper, 0, 0, ms);
}
