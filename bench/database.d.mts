/** Types for database.mjs, so the TypeScript benchmarks share it. */
export function benchDatabase(kind: string, dir: string, prefix?: string): Promise<{ url: string; drop(): Promise<void> }>;
