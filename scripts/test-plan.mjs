// What `npm test` runs where (issue 23: a CI that stays near 20 minutes on
// two cores). Every suite runs once, on this machine's Node; the other Node
// majors and the other runtimes rerun only what can differ there: the
// loader and N-API values (external strings, the addon's classes), Node's
// streams and child processes (spawn failures, signals, the supervisor's
// lookup), workers, and the session over a real backend. What is Rust
// alone (the verdicts, the bridge, the framing under hostile input) or
// JavaScript logic without Node's I/O (the session's state, the text
// segmenter) gives the same result on every Node and runs once.
//
// test-all.mjs reads this list; README "What runs where" says the same.

/** Suites rerun on each other tested Node major, each with why it can differ there. */
export const otherNodeMajorSuites = [
  ["__test__/codec.test.ts", "the addon's loading and its N-API values: decoded events, the error classes"],
  ["__test__/lifting.test.ts", "large values: external strings and arrays parsed across event-loop turns"],
  ["__test__/stream-contract.test.ts", "the addon's constants reaching JavaScript"],
  ["__test__/process.test.ts", "Node's pipes and child processes under the native readers"],
  ["__test__/containment.test.ts", "signals, the supervisor's lookup, a host that dies"],
  ["__test__/faults.test.ts", "a child killed, dying mid-line, closing its stdout: Node's exit and close events"],
  ["__test__/fd-starved.test.ts", "Node's spawn failures with no descriptor left (Node 24 reports some differently)"],
  ["__test__/start-diagnosis.test.ts", "the errno and messages of Node's spawn errors"],
  ["__test__/adversarial.test.ts", "readers that outlive a worker or an environment: worker termination"],
  ["__test__/session-e2e.test.ts", "the session with the real backend, cold, warm and attached to a ChildProcess"],
  ["__test__/testing-kit.test.ts", "the testing kit's child processes and files"],
  ["__test__/session/stream.test.ts", "session.stream(): async iteration and backpressure on Node's streams"],
  ["__test__/session/lifecycle.test.ts", "closing from every state: Node's stdin writes and exit events"],
  ["__test__/vm-realm.test.ts", "`await using` in a vm context: Node 20 and 22 have no Symbol.asyncDispose there, Node 24 has one for every realm"],
];

/** The vitest arguments of the rerun (the session project's files need its setup file, vm-realm.test.ts its pool, so the projects are named). */
export function otherNodeMajorArgs() {
  const files = otherNodeMajorSuites.map(([file]) => file);
  return ["--project", "main", "--project", "session", "--project", "vm-realm", ...files];
}
