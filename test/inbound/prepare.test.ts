/**
 * The prepare step (effects/ingest/prepare.ts) and its worker threads (src/ingest/prepare-pool.ts):
 * a thread produces the same row the event loop would; the trace goes in front of the message's
 * own headers without being copied in front of its body; DNS goes through the main thread's Dns
 * port and a thread keeps an answer only as long as that port says; a dying thread fails its
 * jobs instead of hanging them and the next job gets a new thread; a spooled message is read
 * from its file; a job waiting for DNS holds up no other.
 */
import { Cause, Effect, Exit, Fiber, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, inject, it } from "vitest"
import { authenticate as mailauth } from "mailauth"
import { authenticate, unsignedHeaders } from "../../effects/ingest/authenticate.ts"
import { batchParameters, KeptBatch } from "../../effects/ingest/batch-parameters.ts"
import type { KeptMessage, PreparedMessage, PrepareJob, ReadyMessage } from "../../effects/ingest/prepare.ts"
import { MessagePreparer } from "../../effects/ingest/preparer.ts"
import { Dns, DnsError } from "../../effects/ports/Dns.ts"
import { LOOP_PREPARE_BYTES } from "../../src/config.ts"
import { messagePreparerLayer, type Placement, placed, preparePoolLayer } from "../../src/ingest/prepare-pool.ts"
import { type HostPort, PrepareHost, type PrepareHostShape } from "../../src/ingest/prepare-host.ts"
import { servePrepare } from "../../src/ingest/prepare-serve.ts"
import { openPgliteThread } from "../../src/db/pglite-thread.ts"
import { MessageChannel, type MessagePort } from "node:worker_threads"

const fixture = (p: string) => fs.readFileSync(path.join(import.meta.dirname, "../../fixtures/mail/mail-gem", p))

/** A Dns port over a fixed zone that counts the questions it is asked; answers may be kept `keep.ms`. */
const stubDns = (keep: { ms: number }) => {
  const zone: Record<string, Array<Array<string>>> = {
    "TXT sender.example": [["v=spf1 ip4:127.0.0.1 -all"]],
    "TXT _dmarc.sender.example": [["v=DMARC1; p=none"]],
  }
  const asked: Array<string> = []
  const resolveKept = (name: string, rrtype: string) =>
    Effect.sync(() => {
      asked.push(`${rrtype} ${name}`)
      const records = zone[`${rrtype} ${name.toLowerCase()}`]
      return {
        exit: records ? Exit.succeed(records) : Exit.fail(new DnsError({ message: "no such record", code: "ENOTFOUND", name, rrtype })),
        keepMs: keep.ms,
      }
    })
  return { layer: dnsLayer(resolveKept), asked }
}

/** A Dns port whose every question goes to `resolveKept` (the call a prepare thread's questions make). */
const dnsLayer = (resolveKept: Dns["Service"]["resolveKept"]) => {
  const resolve = (name: string, rrtype: string) => Effect.flatMap(resolveKept(name, rrtype), (a) => a.exit)
  return Layer.succeed(
    Dns,
    Dns.of({ txt: (n) => resolve(n, "TXT") as never, mx: (n) => resolve(n, "MX") as never, a: (n) => resolve(n, "A") as never, resolve, resolveKept, resolveFresh: resolve }),
  )
}

const job = (raw: Uint8Array, over: Partial<PrepareJob> = {}): PrepareJob => ({
  // A copy per job: the pool transfers the bytes to the thread.
  source: { _tag: "Memory", bytes: new Uint8Array(raw) },
  mailFrom: "asha@sender.example",
  client: { ip: "::ffff:127.0.0.1", helo: "mail.sender.example", tls: null },
  mta: "mx.inbox.localhost",
  id: "0badf00d00000001",
  at: Date.parse("2026-11-24T10:00:00Z"),
  ...over,
})

/** Runs `f` with a MessagePreparer built from `layer` (its threads stop when it returns). */
const withPreparer = <A>(layer: Layer.Layer<MessagePreparer>, f: (p: MessagePreparer["Service"]) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(MessagePreparer.use(f).pipe(Effect.provide(layer)))

/** A message whose row and bytes came back (every preparer but one whose host keeps them answers so). */
const inHand = (m: ReadyMessage | undefined): PreparedMessage => {
  if (!m || "kept" in m) throw new Error("expected the message's row and bytes in hand")
  return m
}

/** A prepared message's row, and its pieces read from its bytes where the row says they are. */
const opened = (message: ReadyMessage) => {
  const prepared = inHand(message)
  const row = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(prepared.row))
  const piece = ([at, n]: [number, number]) => Buffer.from(prepared.bytes.buffer, prepared.bytes.byteOffset + at, n)
  return {
    row,
    raw: piece(row.raw),
    text: piece(row.text).toString("utf8"),
    html: piece(row.html).toString("utf8"),
    part: (i: number) => piece(row.parts[i].content),
  }
}

const plain = Buffer.from(
  "From: Asha <asha@sender.example>\r\nTo: box@inbox.localhost\r\nSubject: Ankara ya mwezi\r\nReceived: from relay.sender.example by sender.example\r\n\r\nHabari, hii ni ankara yako.\r\n",
)

describe("a prepare thread", () => {
  it("produces the very row the event loop produces, for real-world mail", async () => {
    const dns = stubDns({ ms: 60_000 })
    const mails = [plain, fixture("plain_emails/raw_email.eml"), fixture("attachment_emails/attachment_content_disposition.eml")]
    for (const file of fs.readdirSync(path.join(import.meta.dirname, "../../fixtures/mail/mail-gem/multi_charset")).slice(0, 3)) {
      mails.push(fixture(`multi_charset/${file}`))
    }
    const rows = (layer: Layer.Layer<MessagePreparer, never, Dns>) =>
      withPreparer(layer.pipe(Layer.provide(dns.layer)), (p) => Effect.forEach(mails, (m) => p.prepare(job(m))))
    const onThread = await rows(preparePoolLayer(1))
    const onLoop = await rows(MessagePreparer.inProcess)
    expect(onThread).toEqual(onLoop)
    expect(onThread).toHaveLength(mails.length)
  })

  it("writes the trace in front of the message's own headers and keeps the whole Authentication-Results", async () => {
    const dns = stubDns({ ms: 60_000 })
    const [prepared] = await withPreparer(preparePoolLayer(1).pipe(Layer.provide(dns.layer)), (p) => Effect.all([p.prepare(job(plain))]))
    const { row, raw } = opened(prepared!)
    // The raw MIME is the trace, then the body byte for byte.
    expect(raw.subarray(raw.length - plain.length).equals(plain)).toBe(true)
    const trace = raw.subarray(0, raw.length - plain.length).toString("utf8")
    expect(row.size).toBe(raw.length)
    expect(trace).toMatch(/^Received-SPF: pass /)
    expect(trace).toMatch(/^Authentication-Results: mx\.inbox\.localhost;/m)
    expect(trace).toMatch(/Received: from mail\.sender\.example \(\[127\.0\.0\.1\]\)\r\n\tby mx\.inbox\.localhost with ESMTP id 0badf00d00000001;/)
    const keys = Object.keys(row.headers)
    expect(keys.indexOf("authentication-results")).toBeLessThan(keys.indexOf("from"))
    // Ours first, then the one the message came with.
    expect(row.headers.received).toEqual([
      expect.stringMatching(/^from mail\.sender\.example \(\[127\.0\.0\.1\]\) by mx\.inbox\.localhost with ESMTP id 0badf00d00000001;/),
      "from relay.sender.example by sender.example",
    ])
    expect(row.auth_results).toMatchObject({ spf: "pass", dmarc: "pass", dkim: [], arc: "none" })
    // Every line of the header, not only the authserv-id.
    expect(row.auth_results.header).toMatch(/^mx\.inbox\.localhost; .*spf=pass/)
    expect(row.auth_results.header).toMatch(/dmarc=pass/)
    expect(prepared).toMatchObject({ subject: "Ankara ya mwezi", fromAddr: "Asha <asha@sender.example>" })
    // Its text is a range of the body, which the database makes into the text (`text_crlf`): no
    // string of it was made here, so no SMS body either (an SMS summary reads the stored row's).
    expect(row.text_crlf).toBe(true)
    expect(raw.subarray(row.text[0], row.text[0] + row.text[1]).toString("utf8").replaceAll("\r\n", "\n")).toBe("Habari, hii ni ankara yako.\n")
    expect(prepared).not.toHaveProperty("smsBody")
  })

  it("encodes the row as JSON and the bytes beside it, each in a buffer of exactly its size: non-ASCII text, attachments and body intact", async () => {
    const dns = stubDns({ ms: 60_000 })
    const pdf = Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0xff, 0xfe, 0x80, 0x0a])
    const mail = Buffer.from(
      [
        "From: =?UTF-8?Q?Zuh=C3=B4r_=E2=9C=93?= <zuhor@sender.example>",
        "To: box@inbox.localhost",
        "Subject: =?UTF-8?B?" + Buffer.from("Ankara “ya” mwezi — €5 🙂").toString("base64") + "?=",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="b"',
        "",
        "--b",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: 8bit",
        "",
        'Habari "quoted" \\ backslash\ttab, ünïcödé ✓',
        "--b",
        "Content-Type: application/pdf",
        "Content-Disposition: attachment; filename*=UTF-8''ankara%E2%9C%93.pdf",
        "Content-Transfer-Encoding: base64",
        "",
        pdf.toString("base64"),
        "--b--",
        "",
      ].join("\r\n"),
    )
    const prepared = inHand((await withPreparer(MessagePreparer.inProcess.pipe(Layer.provide(dns.layer)), (p) => p.prepare(job(mail)))))
    // Transferable as they are: each buffer is exactly the row or the bytes, no pooled slab around it.
    for (const bytes of [prepared.row, prepared.bytes]) {
      expect(bytes.byteOffset).toBe(0)
      expect(bytes.buffer.byteLength).toBe(bytes.byteLength)
    }
    const { row, raw, text, html, part } = opened(prepared)
    expect(row.subject).toBe("Ankara “ya” mwezi — €5 🙂")
    expect(row.from_addr).toBe("Zuhôr ✓ <zuhor@sender.example>")
    expect(text).toBe('Habari "quoted" \\ backslash\ttab, ünïcödé ✓')
    expect(html).toBe("")
    expect(raw.subarray(raw.length - mail.length).equals(mail)).toBe(true)
    expect(row.parts).toHaveLength(1)
    expect(row.parts[0]).toMatchObject({ filename: "ankara✓.pdf", content_type: "application/pdf", size: pdf.length, position: 0 })
    expect(part(0).equals(pdf)).toBe(true)
    // Every byte is one piece's: trace and body, the part, the text, in that order.
    expect(prepared.bytes.byteLength).toBe(raw.length + pdf.length + Buffer.byteLength(text))
  })

  it("asks the main thread's Dns once per name while the answer may be kept, and every time when it may not", async () => {
    const keep = { ms: 60_000 }
    const dns = stubDns(keep)
    await withPreparer(preparePoolLayer(1).pipe(Layer.provide(dns.layer)), (p) =>
      Effect.gen(function*() {
        yield* p.prepare(job(plain))
        const first = dns.asked.length
        expect(first).toBeGreaterThan(0)
        yield* p.prepare(job(plain))
        yield* p.prepare(job(plain))
        expect(dns.asked.length).toBe(first)
        keep.ms = 0
        // Answers kept so far still hold; a new name is asked, and then every time again.
        yield* p.prepare(job(plain, { mailFrom: "a@other.example" }))
        const other = dns.asked.filter((q) => q.includes("other.example")).length
        expect(other).toBeGreaterThan(0)
        yield* p.prepare(job(plain, { mailFrom: "a@other.example" }))
        expect(dns.asked.filter((q) => q.includes("other.example")).length).toBe(2 * other)
      }))
  })

  it("goes on with other jobs while some wait for DNS answers that do not come", async () => {
    // Every sender domain's SPF question is held until released: a job that started is one whose
    // domain was asked: all six get to ask, none waits behind another's unanswered question.
    let release!: () => void
    const released = new Promise<void>((r) => (release = r))
    const asked: Array<string> = []
    const resolveKept = (name: string, rrtype: string) =>
      Effect.promise(async () => {
        asked.push(`${rrtype} ${name}`)
        await released
        return { exit: Exit.fail(new DnsError({ message: "no such record", code: "ENOTFOUND", name, rrtype })), keepMs: 0 }
      })
    const held = dnsLayer(resolveKept)
    const senders = [1, 2, 3, 4, 5, 6].map((i) => `d${i}.example`)
    const prepared = await withPreparer(preparePoolLayer(1).pipe(Layer.provide(held)), (p) =>
      Effect.gen(function*() {
        const all = yield* Effect.forkChild(
          Effect.forEach(senders, (d) => p.prepare(job(plain, { mailFrom: `a@${d}` })), { concurrency: "unbounded" }),
        )
        // Until every job asked, or long enough that one stuck behind another would show (a new
        // thread loads mailauth and mailparser first: seconds on a slow, loaded machine).
        const startedOf = () => senders.filter((d) => asked.some((q) => q.endsWith(` ${d}`)))
        for (let waited = 0; startedOf().length < senders.length && waited < 15_000; waited += 50) {
          yield* Effect.promise(() => new Promise((r) => setTimeout(r, 50)))
        }
        expect(startedOf()).toEqual(senders)
        release()
        return yield* Fiber.join(all)
      }))
    expect(prepared.map((m) => m.subject)).toEqual(senders.map(() => "Ankara ya mwezi"))
    expect(senders.every((d) => asked.some((q) => q.endsWith(` ${d}`)))).toBe(true)
  })

  it("fails the jobs of a thread that dies instead of leaving them waiting, and starts another for the next", async () => {
    const dns = stubDns({ ms: 60_000 })
    const crashing = new URL("../support/crashing-prepare-worker.ts", import.meta.url)
    await withPreparer(preparePoolLayer(1, crashing).pipe(Layer.provide(dns.layer)), (p) =>
      Effect.gen(function*() {
        const died = yield* Effect.exit(p.prepare(job(plain, { mailFrom: "crash@sender.example" })))
        expect(Exit.isFailure(died) && Cause.hasDies(died.cause)).toBe(true)
        const next = yield* p.prepare(job(plain))
        expect(next.subject).toBe("Ankara ya mwezi")
      }))
  })

  it("reads a spooled message from its file, on a thread and on the event loop (INGEST_THREADS=0)", async () => {
    const dns = stubDns({ ms: 60_000 })
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "spool-")), "big.eml")
    const big = Buffer.concat([plain, Buffer.from("x".repeat(76) + "\r\n").fill(0x79, 0, 76)])
    fs.writeFileSync(file, big)
    for (const layer of [preparePoolLayer(1), MessagePreparer.inProcess]) {
      const [prepared] = await withPreparer(layer.pipe(Layer.provide(dns.layer)), (p) =>
        Effect.all([p.prepare({ ...job(plain), source: { _tag: "File", path: file, size: big.length } })]))
      const { raw, text } = opened(prepared!)
      expect(raw.subarray(raw.length - big.length).equals(big)).toBe(true)
      expect(text).toContain("y".repeat(76))
    }
  })
})

describe("where a message is prepared (INGEST_THREADS > 0)", () => {
  /** A preparer that only records which jobs it was given (by their transaction id), and its warm-ups. */
  const recording = () => {
    const ids: Array<string> = []
    const warmed: Array<number> = []
    const shape: MessagePreparer["Service"] = {
      prepare: (j) => Effect.sync(() => ids.push(j.id)).pipe(Effect.andThen(Effect.die("not preparing"))),
      warm: () => void warmed.push(ids.length),
    }
    return { ids, warmed, shape }
  }
  const sized = (n: number, id: string, over: Partial<PrepareJob> = {}) => job(Buffer.alloc(n, 0x61), { id, ...over })
  const jobs = [
    sized(2 * 1024, "small"),
    sized(LOOP_PREPARE_BYTES - 1, "just-under"),
    sized(LOOP_PREPARE_BYTES, "at"),
    sized(100 * 1024, "large"),
    { ...job(plain, { id: "spooled" }), source: { _tag: "File" as const, path: "/nowhere.eml", size: 5 * 1024 * 1024 } },
    sized(2 * 1024, "small-reused", { reusedConnection: true }),
    { ...job(plain, { id: "spooled-reused", reusedConnection: true }), source: { _tag: "File" as const, path: "/nowhere.eml", size: 5 * 1024 * 1024 } },
  ]
  const route = async (placement: Placement) => {
    const threads = recording()
    const loop = recording()
    const routed = placed(threads.shape, loop.shape, placement)
    for (const j of jobs) await Effect.runPromiseExit(routed.prepare(j))
    return { threads: threads.ids, loop: loop.ids, warmed: loop.warmed, threadsWarmed: threads.warmed }
  }

  it("sends large in-memory messages to the event loop, small and spooled ones to the threads; with INGEST_LOOP_BYTES=0 every in-memory one to the loop", async () => {
    expect(await route({ loopBytes: LOOP_PREPARE_BYTES, reusedOnLoop: false })).toEqual({
      threads: ["small", "just-under", "spooled", "small-reused", "spooled-reused"],
      loop: ["at", "large"],
      // Nothing loaded ahead: the loop's code loads with its first job, as without threads.
      warmed: [],
      threadsWarmed: [],
    })
    // INGEST_LOOP_BYTES=0: every in-memory message on the loop, the thread only for spooled ones,
    // whose parsing would stall every session.
    expect(await route({ loopBytes: 0, reusedOnLoop: false })).toMatchObject({
      threads: ["spooled", "spooled-reused"],
      loop: ["small", "just-under", "at", "large", "small-reused"],
    })
  })

  it("with INGEST_REUSED_ON_LOOP, sends a reused connection's in-memory message to the event loop whatever its size, and loads the loop's code with the first job", async () => {
    expect(await route({ loopBytes: LOOP_PREPARE_BYTES, reusedOnLoop: true })).toEqual({
      threads: ["small", "just-under", "spooled", "spooled-reused"],
      loop: ["at", "large", "small-reused"],
      // Once, before the first job (which went to the threads), never again.
      warmed: [0],
      threadsWarmed: [],
    })
  })

  it("prepares both kinds for real: the rows are those of the event loop alone", async () => {
    const dns = stubDns({ ms: 60_000 })
    const large = Buffer.concat([plain, Buffer.from("Habari za leo. ".repeat(5).concat("\r\n").repeat(1_000))])
    expect(large.length).toBeGreaterThanOrEqual(LOOP_PREPARE_BYTES)
    const rows = (layer: Layer.Layer<MessagePreparer, never, Dns>) =>
      withPreparer(layer.pipe(Layer.provide(dns.layer)), (p) => Effect.forEach([plain, large], (m) => p.prepare(job(m))))
    const onLoop = await rows(MessagePreparer.inProcess)
    expect(await rows(messagePreparerLayer(1))).toEqual(onLoop)
    expect(await rows(messagePreparerLayer(1, { loopBytes: 0, reusedOnLoop: false }))).toEqual(onLoop)
    // A reused connection's small message on the loop, the first connection's on the thread.
    const reusedRows = (layer: Layer.Layer<MessagePreparer, never, Dns>) =>
      withPreparer(layer.pipe(Layer.provide(dns.layer)), (p) => Effect.forEach([plain, plain, large], (m, i) => p.prepare(job(m, { reusedConnection: i > 0 }))))
    expect(await reusedRows(messagePreparerLayer(1, { loopBytes: LOOP_PREPARE_BYTES, reusedOnLoop: true }))).toEqual(
      await reusedRows(MessagePreparer.inProcess),
    )
  })
})

describe("on a thread the process already runs (PrepareHost: PGlite's)", () => {
  /** A host over `open`, counting the ports it opened. */
  const counted = (open: () => HostPort | undefined) => {
    const host = { opened: 0, openPort: () => (host.opened++, open()) }
    return host
  }
  const onHost = (host: PrepareHostShape, threads = 1) => preparePoolLayer(threads).pipe(Layer.provide(Layer.succeed(PrepareHost, host)))
  /** A host served right here, on the test's own thread; `ends` are its sides of the ports (closing one is the host going away). */
  const hereHost = () => {
    const ends: Array<MessagePort> = []
    const host = counted(() => {
      const channel = new MessageChannel()
      servePrepare(channel.port2)
      ends.push(channel.port2)
      return { port: channel.port1 }
    })
    return Object.assign(host, { ends })
  }
  const pgliteThread = (workerUrl?: URL) => openPgliteThread({ loadDataDir: new Blob([fs.readFileSync(inject("pgliteTemplate"))]) }, workerUrl)

  /** What a batch call would get as its two parameters: the JSON as text, the blob as hex. */
  const BATCH_PARAMETERS = "SELECT $1::jsonb::text AS json, encode($2::bytea, 'hex') AS blob"
  const destinations = [[{ address_id: 1, rcpt: "a@inbox.localhost" }], [{ address_id: 2, rcpt: "b@inbox.localhost" }], []]

  it.skipIf(process.env.TEST_DATABASE_URL !== undefined)("PGlite's thread prepares the very rows the event loop does and keeps them for the statement, its DNS through the main thread's port", async () => {
    const thread = await pgliteThread()
    try {
      const dns = stubDns({ ms: 60_000 })
      const mails = [plain, fixture("plain_emails/raw_email.eml"), fixture("attachment_emails/attachment_content_disposition.eml")]
      const host = counted(thread.preparePort)
      const onLoop = (await withPreparer(MessagePreparer.inProcess.pipe(Layer.provide(dns.layer)), (p) => Effect.forEach(mails, (m) => p.prepare(job(m))))).map(inHand)
      const [expected] = await thread.source.query(BATCH_PARAMETERS, batchParameters(5, destinations, onLoop))
      const { kept, built } = await withPreparer(onHost(host).pipe(Layer.provide(dns.layer)), (p) =>
        Effect.gen(function*() {
          const kept = (yield* Effect.forEach(mails, (m) => p.prepare(job(m)))).map((m) => {
            if (!("kept" in m)) throw new Error("expected the message kept on PGlite's thread")
            return m
          })
          // The thread builds the parameters from what it kept; one message in hand goes beside them.
          const messages = [{ kept: kept[0]!.kept }, { row: onLoop[1]!.row, bytes: onLoop[1]!.bytes }, { kept: kept[2]!.kept }]
          const built = yield* Effect.promise(() => thread.source.query(BATCH_PARAMETERS, [new KeptBatch(5, destinations, messages)]))
          return { kept, built }
        }))
      expect(host.opened).toBe(1)
      expect(dns.asked.length).toBeGreaterThan(0)
      expect(built).toEqual([expected])
      // Only the summary came back, the same as the event loop's.
      kept.forEach((m, i) => {
        const { row: _row, bytes, ...summary } = onLoop[i]!
        expect(m).toMatchObject({ ...summary, byteLength: bytes.byteLength })
      })
      // The database goes on answering beside it.
      expect(await thread.source.query("SELECT 1 AS one")).toEqual([{ one: 1 }])
    } finally {
      await thread.close()
    }
  })

  it.skipIf(process.env.TEST_DATABASE_URL !== undefined)("a kept message that was let go, or whose port closed, is gone: a statement naming it fails", async () => {
    const thread = await pgliteThread()
    try {
      const dns = stubDns({ ms: 60_000 })
      const naming = (...refs: Array<KeptMessage>) => thread.source.query(BATCH_PARAMETERS, [new KeptBatch(5, refs.map(() => []), refs.map((m) => ({ kept: m.kept })))])
      // Letting go travels on the prepare port, which the database's statements do not wait for: asked until it failed.
      const failureNaming = async (m: KeptMessage) => {
        for (const until = Date.now() + 10_000; Date.now() < until; await new Promise((r) => setTimeout(r, 10))) {
          const error = await naming(m).then(() => undefined, (e: Error) => e)
          if (error) return error
        }
      }
      const left = await withPreparer(onHost(counted(thread.preparePort)).pipe(Layer.provide(dns.layer)), (p) =>
        Effect.gen(function*() {
          const [a, b] = (yield* Effect.forEach([plain, plain], (m) => p.prepare(job(m)))) as Array<KeptMessage>
          expect(yield* Effect.promise(() => naming(a!, b!))).toHaveLength(1)
          // A retry may name them again, until they are let go.
          expect(yield* Effect.promise(() => naming(a!))).toHaveLength(1)
          a!.release()
          expect((yield* Effect.promise(() => failureNaming(a!)))?.message).toMatch(/no longer kept/)
          expect(yield* Effect.promise(() => naming(b!))).toHaveLength(1)
          return b!
        }))
      // The preparer stopped and closed its port: what it kept went with it.
      expect((await failureNaming(left))?.message).toMatch(/no longer kept/)
    } finally {
      await thread.close()
    }
  })

  it.skipIf(process.env.TEST_DATABASE_URL !== undefined)("an exception nothing caught on PGlite's thread fails the jobs there and ends its preparing, not its database", async () => {
    const thread = await pgliteThread(new URL("../support/throwing-pglite-worker.ts", import.meta.url))
    try {
      const dns = stubDns({ ms: 60_000 })
      const host = counted(thread.preparePort)
      await withPreparer(onHost(host).pipe(Layer.provide(dns.layer)), (p) =>
        Effect.gen(function*() {
          expect((yield* p.prepare(job(plain))).subject).toBe("Ankara ya mwezi")
          const died = yield* Effect.exit(p.prepare(job(plain, { mailFrom: "throw@sender.example" })))
          expect(Exit.isFailure(died) && Cause.hasDies(died.cause)).toBe(true)
          expect(String(Cause.squash((died as Exit.Failure<unknown, unknown>).cause))).toMatch(/thrown while preparing/)
          // The next message on a thread of the pool's own; the host is not asked again.
          expect((yield* p.prepare(job(plain))).subject).toBe("Ankara ya mwezi")
          expect(host.opened).toBe(1)
        }))
      expect(await thread.source.query("SELECT 1 AS one")).toEqual([{ one: 1 }])
      // A port asked for later is closed at once: that thread prepares no more.
      const late = thread.preparePort()!
      await new Promise<void>((resolve) => late.port.on("close", () => resolve()))
    } finally {
      await thread.close()
    }
  })

  it("takes every in-memory job through one port, however many come and however many threads are allowed", async () => {
    const dns = stubDns({ ms: 60_000 })
    const host = hereHost()
    const prepared = await withPreparer(onHost(host, 2).pipe(Layer.provide(dns.layer)), (p) =>
      Effect.forEach([1, 2, 3, 4], (i) => p.prepare(job(plain, { id: `job${i}` })), { concurrency: "unbounded" }))
    expect(prepared.map((m) => m.subject)).toEqual(["Ankara ya mwezi", "Ankara ya mwezi", "Ankara ya mwezi", "Ankara ya mwezi"])
    expect(host.opened).toBe(1)
    for (const end of host.ends) end.close()
  })

  it("leaves spooled mail to a thread of the pool's own: the host is not even opened for it", async () => {
    const dns = stubDns({ ms: 60_000 })
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "spool-")), "big.eml")
    fs.writeFileSync(file, plain)
    const host = hereHost()
    await withPreparer(onHost(host).pipe(Layer.provide(dns.layer)), (p) =>
      Effect.gen(function*() {
        const spooled = yield* p.prepare({ ...job(plain), source: { _tag: "File", path: file, size: plain.length } })
        expect(spooled.subject).toBe("Ankara ya mwezi")
        expect(host.opened).toBe(0)
        expect((yield* p.prepare(job(plain))).subject).toBe("Ankara ya mwezi")
        expect(host.opened).toBe(1)
      }))
    for (const end of host.ends) end.close()
  })

  it("fails the jobs in flight when the host's port closes, and prepares the next ones on a thread of its own", async () => {
    // The host here is this very thread, whose end of the port the test closes (as when PGlite's
    // thread ends); the job in flight waits for a DNS answer held back until then.
    let release!: () => void
    const released = new Promise<void>((r) => (release = r))
    let asked = 0
    const held = dnsLayer((name, rrtype) =>
      Effect.promise(async () => {
        if (asked++ === 0) await released
        return { exit: Exit.fail(new DnsError({ message: "no such record", code: "ENOTFOUND", name, rrtype })), keepMs: 0 }
      }))
    const host = hereHost()
    await withPreparer(onHost(host).pipe(Layer.provide(held)), (p) =>
      Effect.gen(function*() {
        const inFlight = yield* Effect.forkChild(Effect.exit(p.prepare(job(plain))))
        for (let waited = 0; asked === 0 && waited < 15_000; waited += 20) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
        expect(asked).toBe(1)
        host.ends[0]!.close()
        const died = yield* Fiber.join(inFlight)
        expect(Exit.isFailure(died) && Cause.hasDies(died.cause)).toBe(true)
        release()
        const next = yield* p.prepare(job(plain))
        expect(next.subject).toBe("Ankara ya mwezi")
        // Not the host again: its port is gone for good.
        expect(host.opened).toBe(1)
      }))
  })
})

describe("authentication of an unsigned message", () => {
  const resolver = async (name: string, rrtype: string) => {
    const zone: Record<string, Array<Array<string>>> = {
      "TXT sender.example": [["v=spf1 ip4:127.0.0.1 -all"]],
      "TXT _dmarc.sender.example": [["v=DMARC1; p=reject"]],
    }
    const records = zone[`${rrtype} ${name}`]
    if (records) return records
    throw Object.assign(new Error("no such record"), { code: "ENOTFOUND" })
  }
  const input = { ip: "127.0.0.1", helo: "mail.sender.example", sender: "asha@sender.example", mta: "mx.inbox.localhost" }

  it("reads the header block only, and comes to the very verdicts and trace of reading it all", async () => {
    const big = Buffer.concat([plain, Buffer.from("na mengine mengi\r\n".repeat(5000))])
    expect(unsignedHeaders(big)?.toString()).toBe(plain.toString().slice(0, plain.indexOf("\r\n\r\n") + 4))
    for (const message of [plain, big, fixture("plain_emails/raw_email.eml")]) {
      const ours = await authenticate(message, input, resolver)
      const whole = await mailauth(message, { ...input, resolver, disableBimi: true })
      expect(ours.headers).toBe(whole.headers)
      expect(ours.results.spf).toBe(whole.spf ? whole.spf.status.result : "none")
      expect(ours.results.dmarc).toBe(whole.dmarc ? whole.dmarc.status.result : "none")
    }
  })

  it("reads all of a message that carries a DKIM or ARC signature, or has no body", () => {
    const signed = Buffer.from("DKIM-Signature: v=1; a=rsa-sha256; d=sender.example; s=mail; b=abc\r\n" + plain.toString())
    const sealed = Buffer.from("Arc-Seal: i=1; a=rsa-sha256; d=relay.example\r\n" + plain.toString())
    const folded = Buffer.from("Subject: x\r\ndkim-signature :\r\n v=1\r\n\r\nbody\r\n")
    for (const m of [signed, sealed, folded]) expect(unsignedHeaders(m)).toBeUndefined()
    expect(unsignedHeaders(Buffer.from("Subject: only headers\r\n"))).toBeUndefined()
    // Bare-LF mail ends its header at the first blank line, whatever CRLF lines come later.
    expect(unsignedHeaders(Buffer.from("Subject: lf\n\nbody\r\n\r\nmore\r\n"))?.toString()).toBe("Subject: lf\n\n")
    expect(unsignedHeaders(Buffer.from("Subject: crlf\r\n\r\nbody\n\nmore\n"))?.toString()).toBe("Subject: crlf\r\n\r\n")
    // A signature named in the body is no signature.
    expect(unsignedHeaders(Buffer.from("Subject: x\r\n\r\nDKIM-Signature: quoted in the body\r\n"))).toBeDefined()
  })
})
