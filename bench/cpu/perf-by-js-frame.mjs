/**
 * On-CPU samples of one thread charged to the innermost JavaScript frame of each sample's stack:
 * a builtin, V8 runtime call or system call is charged to the JS function (and its package or
 * file) that made it. `--cpu-prof` samples wall time, so a thread that loses its core inside a
 * socket write shows that time as the write's; `perf` with `cpu-clock` samples only while on CPU.
 *
 *   BENCH_NODE_FLAGS=--perf-basic-prof ... npm run bench -- mx &      # JIT frames get names
 *   perf record -e cpu-clock -F 2000 -g -p <service pid> -o /tmp/perf.data -- sleep 5
 *   perf script -i /tmp/perf.data --comm MainThread -F comm,ip,sym > /tmp/main.txt
 *   node bench/cpu/perf-by-js-frame.mjs /tmp/main.txt [TOP=30]
 *
 * Samples with no JS frame are shown by their innermost native frame (the event loop's own work,
 * GC tasks, socket writes called from C++).
 */
import * as fs from "node:fs"
import { placeOf } from "./place.mjs"

const [file, top = "30"] = process.argv.slice(2)
if (!file) throw new Error("usage: perf-by-js-frame.mjs PERF_SCRIPT_OUTPUT [TOP]")

const byPlace = new Map()
const byFunction = new Map()
let total = 0
const add = (m, k) => m.set(k, (m.get(k) ?? 0) + 1)

const flush = (frames) => {
  if (frames.length === 0) return
  total++
  for (const f of frames) {
    const url = /(file:\/\/\S+|node:(?!:)\S+)/.exec(f)?.[1]
    if (!url) continue
    add(byPlace, placeOf(url))
    add(byFunction, f.slice(0, 120))
    return
  }
  const leaf = frames[0].slice(0, 80)
  add(byPlace, `(native) ${leaf}`)
  add(byFunction, `(native) ${leaf}`)
}

let frames = []
for (const line of fs.readFileSync(file, "utf8").split("\n")) {
  if (!/^\s/.test(line)) {
    flush(frames)
    frames = []
    continue
  }
  const sym = line.trim().split(" ").slice(1).join(" ")
  if (sym) frames.push(sym)
}
flush(frames)

const show = (m) =>
  [...m].sort((a, b) => b[1] - a[1]).slice(0, Number(top)).forEach(([k, n]) => console.log(`${(100 * n / total).toFixed(2).padStart(6)} % ${k}`))
console.log(`${total} samples`)
console.log("--- by package or file")
show(byPlace)
console.log("--- by function")
show(byFunction)
