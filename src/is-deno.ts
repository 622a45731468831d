/** Whether this process runs on Deno rather than Node (the same sources run on both). */
export const isDeno = (globalThis as { Deno?: unknown }).Deno !== undefined
