/**
 * The periodic DNS re-check shared by receiving and sending domains: every
 * DOMAIN_RECHECK_INTERVAL each verified or suspended domain is looked up again by its
 * capability's `recheck` (records gone → suspended, back → verified, outage → unchanged).
 * Rows are leased while checked, so several instances share the work.
 */
import { Duration, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import type { Database } from "../../effects/ports/Database.ts"
import { claimDue, type WorkerSpec, workerLayer } from "./worker.ts"

export interface DomainRecheck<Row, R> {
  readonly name: string
  /** Table with `status`, `next_check_at` and `locked_until` columns. */
  readonly table: string
  readonly recheck: (row: Row) => Effect.Effect<unknown, unknown, R>
}

export const domainRecheckWorker = <Row, R>(spec: DomainRecheck<Row, R>, interval: Duration.Input): WorkerSpec<Row, R | Database> => ({
  name: spec.name,
  // Poll at least every minute so a domain is looked at soon after it falls due.
  pollInterval: Duration.min(Duration.fromInputUnsafe(interval), Duration.minutes(1)),
  batchSize: 20,
  concurrency: 4,
  claim: claimDue<Row>({ table: spec.table, dueColumn: "next_check_at", statuses: ["verified", "suspended"], lease: "2 minutes" }),
  handle: (row) => Effect.asVoid(spec.recheck(row)),
})

/** The worker at DOMAIN_RECHECK_INTERVAL. */
export const domainRecheckLayer = <Row, R>(spec: DomainRecheck<Row, R>) =>
  Layer.unwrap(AppConfig.useSync((config) => workerLayer(domainRecheckWorker(spec, config.domainRecheckInterval))))
