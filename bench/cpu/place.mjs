/**
 * Where a profiled frame's code lives, short enough to group by: a package (effect by file), a
 * Node module, or one of our files by its path under dist/, src/ or effects/.
 * `file:///…/node_modules/effect/dist/internal/effect.js:407:11` → `effect/effect.js`.
 */
export const placeOf = (url) => {
  const u = url.replace(/:\d+:\d+$/, "")
  if (u.includes("node_modules/")) {
    const rest = u.split("node_modules/").at(-1).split("/")
    const pkg = rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]
    return pkg === "effect" ? `effect/${rest.at(-1)}` : pkg
  }
  if (u.startsWith("node:")) return u.startsWith("node:internal/") ? `node:${u.split("/").at(-1)}` : u
  return u.replace(/^file:\/\/\/.*?\/(dist|src|effects)\//, "$1/")
}
