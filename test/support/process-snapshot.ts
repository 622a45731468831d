/**
 * What a child process is doing, from /proc (Linux), for a test whose child never became ready:
 * its command line (did the lean re-execution happen?), its state and each thread's state and
 * kernel wait channel (stuck in execve, a lock, a read?). Empty where /proc is not there.
 */
import * as fs from "node:fs"

const read = (file: string): string => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

export const processSnapshot = (pid: number | undefined): string => {
  if (pid === undefined || !fs.existsSync(`/proc/${pid}`)) return ""
  const status = read(`/proc/${pid}/status`).split("\n").filter((l) => /^(State|Threads|VmRSS):/.test(l)).join(", ")
  let tasks: Array<string> = []
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`).map((t) => {
      const stat = read(`/proc/${pid}/task/${t}/stat`)
      const comm = /\((.*)\)\s+(\S)/.exec(stat)
      return `${comm?.[1] ?? "?"}:${comm?.[2] ?? "?"}:${read(`/proc/${pid}/task/${t}/wchan`) || "-"}`
    })
  } catch { /* gone meanwhile */ }
  return `\nprocess ${pid}: ${read(`/proc/${pid}/cmdline`).split("\0").join(" ").trim()}; ${status}; threads ${tasks.join(" ")}`
}
