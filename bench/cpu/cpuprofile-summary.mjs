/**
 * Where a `--cpu-prof` profile's time went: self time by package or file, by function, and the
 * inclusive time of the functions named on the command line (everything under them).
 *
 *   BENCH_PROFILE=/tmp/prof BENCH_CASES=reuse BENCH_ENGINES=postgres BENCH_ACCOUNTS=1 BENCH_PEERS=0 npm run bench -- mx
 *   node bench/cpu/cpuprofile-summary.mjs /tmp/prof/CPU.*.cpuprofile [TOP=30] [prepareMessage,onRecipient,...]
 *   SINCE=_feedDataStream node bench/cpu/cpuprofile-summary.mjs …   # from the first message's DATA on
 *
 * `--cpu-prof` samples wall time of the main thread: "(idle)" is the loop waiting, "(program)"
 * native work outside JavaScript (socket I/O, the loop itself), "(garbage collector)" GC pauses.
 * Percentages are of the busy samples (idle excluded); µs per message needs the message count.
 */
import * as fs from "node:fs"
import { placeOf } from "./place.mjs"

const [file, top = "30", names = ""] = process.argv.slice(2)
if (!file) throw new Error("usage: cpuprofile-summary.mjs PROFILE [TOP] [fn,fn,...]")
const profile = JSON.parse(fs.readFileSync(file, "utf8"))

const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

/** A frame's package or file; native frames by their V8 name ("(garbage collector)", "(program)"). */
const framePlaceOf = ({ url, functionName }) => (url ? placeOf(url) : functionName.startsWith("(") ? functionName : "(native)")

/**
 * SINCE=<function>: only samples from the first one with that function on its stack (say
 * `_feedDataStream`, the first message's DATA), so start-up and seeding stay out of the shares.
 */
const since = process.env.SINCE
const onStack = (id, name) => {
  for (let n = id; n !== undefined; n = parent.get(n)) if (nodes.get(n).callFrame.functionName === name) return true
  return false
}
let started = !since
const dt = new Map()
profile.samples.forEach((id, i) => {
  started ||= onStack(id, since)
  if (started) dt.set(id, (dt.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})

const byPlace = new Map()
const byFunction = new Map()
const wanted = names.split(",").filter(Boolean)
const inclusive = new Map(wanted.map((w) => [w, 0]))
let busy = 0
let idle = 0
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v)
for (const [id, us] of dt) {
  const { callFrame } = nodes.get(id)
  if (callFrame.functionName === "(idle)") {
    idle += us
    continue
  }
  busy += us
  add(byPlace, framePlaceOf(callFrame), us)
  add(byFunction, `${callFrame.functionName || "(anonymous)"} ${framePlaceOf(callFrame)}:${callFrame.lineNumber + 1}`, us)
  // Inclusive: charge the sample once to each wanted function on its stack.
  const seen = new Set()
  for (let n = id; n !== undefined; n = parent.get(n)) {
    const name = nodes.get(n).callFrame.functionName
    if (inclusive.has(name) && !seen.has(name)) {
      seen.add(name)
      add(inclusive, name, us)
    }
  }
}

const ms = (us) => (us / 1000).toFixed(0).padStart(7)
const show = (m) =>
  [...m].sort((a, b) => b[1] - a[1]).slice(0, Number(top)).forEach(([k, us]) => console.log(`${(100 * us / busy).toFixed(2).padStart(6)} % ${ms(us)} ms ${k}`))
console.log(`busy ${ms(busy)} ms, idle ${ms(idle)} ms (${(100 * busy / (busy + idle)).toFixed(1)} % busy)`)
console.log("--- self time by package or file")
show(byPlace)
console.log("--- self time by function")
show(byFunction)
if (wanted.length) {
  console.log("--- inclusive")
  show(inclusive)
}
