// Types of node-binaries.mjs, for the TypeScript tests that use it.
export declare const cacheDir: string;
export declare const testedNodeMajors: string[];
export declare const oldestNode: string;
export declare function nodeBinary(arch: "x64" | "arm64", spec: string): string;
export declare function unpackTwins(arch: "arm64"): string[];
export declare function npmPackage(spec: string): string;
