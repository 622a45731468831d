/**
 * The periodic DNS re-check shared by receiving and sending domains: every
 * DOMAIN_RECHECK_INTERVAL each verified or suspended domain is looked up again by its
 * capability's `recheck` (records gone → suspended, back → verified, outage → unchanged).
 * Rows are leased while checked, so several instances share the work.
 */
import { Duration, type Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import { claimDue, type WorkerSpec, workerLayer } from "./worker.ts"

export interface DomainRecheck<Row> {
  readonly name: string
  /** Table with `status`, `next_check_at` and `locked_until` columns. */
  readonly table: string
  readonly recheck: (row: Row) => Effect.Effect<unknown, unknown, any>
}

export const domainRecheckWorker = <Row>(spec: DomainRecheck<Row>, interval: Duration.Input): WorkerSpec<Row> => ({
  name: spec.name,
  // Poll at least every minute so a domain is looked at soon after it falls due.
  pollInterval: Duration.min(Duration.fromInputUnsafe(interval), Duration.minutes(1)),
  batchSize: 20,
  concurrency: 4,
  claim: claimDue<Row>({ table: spec.table, dueColumn: "next_check_at", statuses: ["verified", "suspended"], lease: "2 minutes" }),
  handle: spec.recheck,
})

/** The worker at DOMAIN_RECHECK_INTERVAL. */
export const domainRecheckLayer = <Row>(spec: DomainRecheck<Row>) =>
  Layer.unwrap(AppConfig.useSync((config) => workerLayer(domainRecheckWorker(spec, config.domainRecheckInterval))))
