/**
 * The URL of a module beside the caller's (`from`: its `import.meta.url`), named by its source
 * file. `npm start` runs the service compiled to JavaScript (dist/, build.mjs), where `./x.ts` is
 * `./x.js`; Deno, vitest and `node src/main.ts` run the sources themselves. For the scripts of
 * worker threads and child processes, which are started by path rather than imported.
 */
export const siblingModule = (name: string, from: string): URL =>
  new URL(from.endsWith(".js") ? name.replace(/\.ts$/, ".js") : name, from)
