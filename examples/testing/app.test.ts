// A vitest suite of an application that hosts an AgentLane agent, testing
// its own code against the package's scripted backend: no Python, no model.
import { afterEach, expect, it } from "vitest";
import { createAgentSession } from "@agentlanejs/process-bridge-native";
import { scriptedBackend, type TestBackend } from "@agentlanejs/process-bridge-native/testing";

let fake: TestBackend;
afterEach(() => fake.dispose());

it("asks before saving a note, and says what happened", async () => {
  fake = scriptedBackend({
    runs: [
      {
        steps: [
          { text: "Saving your note. " },
          { tool: "save_note", args: { path: "todo.txt" }, approval: { reason: "Writes a file." }, result: "saved" },
          { text: "Done." },
        ],
      },
    ],
  });
  const asked: string[] = [];
  await using session = await createAgentSession({
    backend: fake.backend,
    approvals: ({ request, reason }) => {
      asked.push(`${request.tool_name}: ${reason}`);
      return true;
    },
  });
  const result = await session.run("Save a note");
  expect(result).toMatchObject({ status: "completed", finalOutput: "Done." });
  expect(asked).toEqual(["save_note: Writes a file."]);
  expect(fake.commands().map((c) => c.type)).toEqual(["prompt", "approve"]);
});
