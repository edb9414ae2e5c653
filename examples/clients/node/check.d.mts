// Types of check.mjs.
export declare function check(
  bridgeArgs: string[],
  options?: { json?: boolean; bridge?: string; cwd?: string; log?: (line: string) => void },
): Promise<{ backendVersion: string; runs: { toolResult: unknown; finalOutput: unknown }[] }>;
