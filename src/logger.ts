/**
 * Structured JSON logs, one object per line, with annotations (request_id, worker, …).
 * Nothing secret is ever passed to a log call: keys, passwords and tokens are logged by prefix
 * at most.
 *
 * Lines never cost the event loop a write each: they go to a buffer that is written in batches,
 * asynchronously (stdout to a pipe is a blocking write per line in Node, which was ~30 % of an
 * API request's CPU). The access log skips Effect's logger altogether (no fiber per request).
 * Spans are recorded only when tracing is configured (OTEL_EXPORTER_OTLP_ENDPOINT).
 */
import { Config, Context, Effect, Layer, Logger, Option, References } from "effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as OtlpSerialization from "effect/observability/OtlpSerialization"
import * as OtlpTracer from "effect/observability/OtlpTracer"
import cluster from "node:cluster"
import * as fs from "node:fs"

const levels = { debug: "Debug", info: "Info", warn: "Warn", error: "Error" } as const
/** Linux's atomic pipe write size. */
const PIPE_BUF = 4096
export type LogLevelName = keyof typeof levels

export interface LogSink {
  /** Queues one line (without its newline). */
  readonly write: (line: string) => void
  /** Resolves once every line queued so far is written. */
  readonly flush: () => Promise<void>
  /** Writes what is queued at once (process exit). */
  readonly flushSync: () => void
}

export interface SinkOptions {
  /** A batch is written at the latest this long after its first line. */
  readonly maxDelayMs?: number
  /** ... or as soon as it holds this many bytes. */
  readonly batchBytes?: number
  /** Beyond this many bytes waiting (a reader that stopped reading), lines are dropped and counted. */
  readonly maxBufferedBytes?: number
  /**
   * Bytes per write at most, unless one line is longer (default PIPE_BUF: atomic on a pipe that
   * several processes share).
   */
  readonly chunkBytes?: number
}

/** Where a sink's chunks go: an asynchronous write (may be partial) and a synchronous one. */
export interface SinkTarget {
  readonly write: (chunk: Buffer, done: (err: NodeJS.ErrnoException | null, written: number) => void) => void
  readonly writeSync: (chunk: Buffer) => void
}

const fdTarget = (fd: number): SinkTarget => ({
  write: (chunk, done) => fs.write(fd, chunk, 0, chunk.length, null, done),
  writeSync: (chunk) => void fs.writeSync(fd, chunk),
})

/**
 * A buffered writer on a file descriptor. Batches go out with asynchronous `fs.write` (the
 * thread pool waits on a slow pipe, not the event loop); one batch is in flight at a time, so
 * lines keep their order.
 */
export const makeFdSink = (fd: number, options: SinkOptions = {}): LogSink => makeSink(fdTarget(fd), options)

export const makeSink = (target: SinkTarget, options: SinkOptions = {}): LogSink => {
  const maxDelayMs = options.maxDelayMs ?? 20
  const batchBytes = options.batchBytes ?? 64 * 1024
  const maxBufferedBytes = options.maxBufferedBytes ?? 16 * 1024 * 1024
  const chunkBytes = options.chunkBytes ?? PIPE_BUF
  let pending: Array<string> = []
  let head = 0
  let pendingBytes = 0
  let dropped = 0
  let inFlight: Buffer | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  let waiters: Array<() => void> = []

  /**
   * The next chunk to write: whole lines, at most `chunkBytes` unless one line is longer. A write
   * of up to PIPE_BUF bytes to a pipe is atomic, so with that bound the lines of several processes
   * sharing stdout (WEB_CONCURRENCY) never interleave mid-line.
   */
  const take = (): Buffer | undefined => {
    if (dropped > 0) {
      pending.push(JSON.stringify({ message: "log lines dropped: the log reader is too slow", level: "WARN", timestamp: new Date().toISOString(), annotations: { dropped } }) + "\n")
      pendingBytes += 120
      dropped = 0
    }
    if (head === pending.length) return undefined
    const from = head
    let bytes = 0
    let chars = 0
    while (head < pending.length) {
      const size = Buffer.byteLength(pending[head]!)
      if (head > from && bytes + size > chunkBytes) break
      bytes += size
      chars += pending[head++]!.length
    }
    const chunk = pending.slice(from, head).join("")
    if (head === pending.length) {
      pending = []
      head = 0
    } else if (head > 4096 && head * 2 > pending.length) {
      pending = pending.slice(head)
      head = 0
    }
    pendingBytes -= chars
    return Buffer.from(chunk, "utf8")
  }

  const settle = () => {
    if (inFlight || head < pending.length) return
    const w = waiters
    waiters = []
    for (const f of w) f()
  }

  const writeOut = (buf: Buffer) => {
    inFlight = buf
    target.write(buf, (err, written) => {
      if (err && err.code === "EAGAIN") {
        setTimeout(() => writeOut(buf), 5).unref()
        return
      }
      inFlight = undefined
      // A partial write (a pipe near full) continues with the rest; an error drops the batch
      // rather than retrying forever (stdout closed: nobody is reading).
      if (!err && written < buf.length) return writeOut(buf.subarray(written))
      const next = take()
      if (next) writeOut(next)
      else settle()
    })
  }

  const flushSoon = () => {
    if (timer) {
      clearTimeout(timer)
      timer = undefined
    }
    if (inFlight) return // the completion of the write in flight takes the rest
    const batch = take()
    if (batch) writeOut(batch)
    else settle()
  }

  return {
    write: (line) => {
      if (pendingBytes > maxBufferedBytes) {
        dropped++
        return
      }
      pending.push(line + "\n")
      pendingBytes += line.length + 1
      if (pendingBytes >= batchBytes) flushSoon()
      else if (!timer && !inFlight) {
        timer = setTimeout(flushSoon, maxDelayMs)
        timer.unref?.()
      }
    },
    flush: () =>
      new Promise<void>((resolve) => {
        waiters.push(resolve)
        flushSoon()
      }),
    flushSync: () => {
      if (timer) clearTimeout(timer)
      timer = undefined
      // A batch already handed to the thread pool is written there; only the queue is left.
      const rest = take()
      if (!rest) return
      try {
        target.writeSync(rest)
      } catch { /* stdout gone */ }
    },
  }
}

/**
 * Bytes per write to stdout for a process that has it to itself. One write at a time goes
 * through the thread pool and its completion waits for a turn of a busy event loop, so PIPE_BUF
 * chunks (~1 per ms) could not keep up with the access log at ~10k requests/s: the buffer filled
 * to its bound (tens of MB of live heap, longer GC pauses) and lines were dropped.
 */
const SOLE_WRITER_CHUNK_BYTES = 1024 * 1024

let stdout: LogSink | undefined
/** The process's stdout as a buffered sink, flushed synchronously when the process exits. */
export const stdoutSink = (): LogSink => {
  if (!stdout) {
    // Workers of a cluster share the pipe: their writes stay atomic.
    const sink = makeFdSink(1, { chunkBytes: cluster.isWorker ? PIPE_BUF : SOLE_WRITER_CHUNK_BYTES })
    process.once("exit", () => sink.flushSync())
    stdout = sink
  }
  return stdout
}

/** Writes one access-log line per answered request; absent when the level drops them. */
export class AccessLog extends Context.Service<AccessLog, {
  readonly write: ((entry: {
    readonly request_id: string
    readonly method: string
    readonly path: string
    readonly status: number
    readonly ms: number
  }) => void) | undefined
}>()("app/AccessLog") {}

/**
 * The same shape as Effect's JSON logger (message, level, timestamp, annotations), written
 * straight to the sink.
 */
const accessLog = (sink: LogSink, level: LogLevelName) =>
  AccessLog.of({
    write: level === "debug" || level === "info"
      ? (entry) =>
        sink.write(
          `{"message":"http","level":"INFO","timestamp":"${new Date().toISOString()}","annotations":${JSON.stringify(entry)}}`,
        )
      : undefined,
  })

/**
 * Spans cost a stack trace and a span object each; they are made only when an OTLP endpoint is
 * configured (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` for the
 * full traces URL), and then exported there.
 */
export const tracingLayer = Layer.unwrap(
  Effect.gen(function*() {
    const base = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT"))
    const traces = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    const url = Option.isSome(traces) ? Option.some(traces.value) : Option.map(base, (b) => `${b.replace(/\/+$/, "")}/v1/traces`)
    if (Option.isNone(url)) return Layer.succeed(References.TracerEnabled, false)
    return OtlpTracer.layer({ url: url.value, resource: { serviceName: "tz-mail-api" } }).pipe(
      Layer.provide([FetchHttpClient.layer, OtlpSerialization.layerJson]),
    ) as Layer.Layer<never>
  }).pipe(Effect.orDie),
)

/** JSON lines at `level` and above to `sink` (stdout by default), plus the access log. */
export const loggerLayer = (level: LogLevelName, sink: LogSink = stdoutSink()): Layer.Layer<never> =>
  Layer.mergeAll(
    Logger.layer([Logger.make((options) => sink.write(Logger.formatJson.log(options)))]),
    Layer.succeed(References.MinimumLogLevel, levels[level]),
    Layer.succeed(AccessLog, accessLog(sink, level)),
    tracingLayer,
  )

/** Tests keep only errors, so a failing test's output stays readable. */
export const quietLoggerLayer = loggerLayer(process.env.TEST_LOG_LEVEL === "debug" ? "debug" : "error")
