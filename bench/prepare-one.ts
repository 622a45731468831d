/**
 * One message's preparing alone (effects/ingest/prepare.ts `prepareMessage`: authenticate, trace,
 * parse, encode), as the MX's event loop does it for 2 KiB mail with a PostgreSQL server on two
 * cores: a message in postfix smtp-source's shape (the MX bench's load), its verdicts kept after
 * the first (as under load: one sender), no DNS. Prints µs per message over N messages, after a
 * warm-up. Preparing was ~30 % of the event loop's work per message under that load
 * (bench/REPORT.md, MX ingest, 2026-11-28 fourteenth session); this times it without the noise of
 * a whole run. Compare two checkouts by running it in each, alternately, several times.
 *
 *   node bench/prepare-one.ts            # N=40000, SIZE=2048 (body bytes)
 */
import { prepareMessage, type PrepareJob } from "../effects/ingest/prepare.ts"
import { makeVerdictMemo } from "../effects/ingest/verdicts.ts"

const N = Number(process.env.N ?? 40_000)
const SIZE = Number(process.env.SIZE ?? 2048)

/** smtp-source's message: five header lines, then numbered lines of X (78 characters and CR LF). */
const message = (): Buffer => {
  const head = [
    "From: <bench@sender.example>",
    "To: <a@x.example>",
    `Date: ${new Date(0).toUTCString().replace("GMT", "+0000 (UTC)")}`,
    "Message-Id: <212e.0003.0000@sender.example>",
    "Subject: Ankara ya mwezi",
    "",
    "",
  ].join("\r\n")
  const lines: Array<string> = []
  for (let n = 1, left = SIZE; left > 0; n++) {
    const line = `${n % 10}${"X".repeat(77)}`.slice(0, Math.max(1, left - 2))
    lines.push(line)
    left -= line.length + 2
  }
  return Buffer.from(head + lines.join("\r\n") + "\r\n")
}

// Every name is unknown to this resolver: SPF and DMARC say `none`, and the verdicts are kept.
const resolver = Object.assign(
  (_name: string, _rrtype: string) => Promise.reject(Object.assign(new Error("ENOTFOUND"), { code: "ENOTFOUND" })),
  { keptUntil: () => performance.now() + 3_600_000 },
)
const verdicts = makeVerdictMemo<Awaited<ReturnType<typeof import("../effects/ingest/authenticate.ts").authenticate>>>()
const raw = message()
const job = (i: number): PrepareJob => ({
  source: { _tag: "Memory", bytes: new Uint8Array(raw) },
  mailFrom: "bench@sender.example",
  client: { ip: "127.0.0.1", helo: "sender.example", tls: null },
  mta: "mx.bench.example",
  id: `bench${i}`,
  at: Date.now(),
})

for (let i = 0; i < Math.min(5_000, N); i++) await prepareMessage(job(i), resolver, verdicts)
const t0 = performance.now()
for (let i = 0; i < N; i++) await prepareMessage(job(i), resolver, verdicts)
const us = ((performance.now() - t0) * 1000) / N
console.log(JSON.stringify({ messages: N, bytes: raw.length, usPerMessage: Number(us.toFixed(1)) }))
