/**
 * Receiving-domain re-check: every DOMAIN_RECHECK_INTERVAL each verified or suspended domain is
 * looked up again. Records gone → suspended (its mail is deferred with 451 4.4.3); records back
 * → verified. Domains are leased while checked, so several instances share the work.
 */
import { Duration, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import type { ReceivingDomainRow } from "../../effects/receiving-domains/schema.ts"
import { ReceivingDomains } from "../../effects/receiving-domains/service.ts"
import { claimDue, type WorkerSpec, workerLayer } from "./worker.ts"

export const receivingDomainRecheckWorker = (interval: Duration.Input): WorkerSpec<ReceivingDomainRow> => ({
  name: "receiving-domain-recheck",
  // Poll at least every minute so a domain is looked at soon after it falls due.
  pollInterval: Duration.min(Duration.fromInputUnsafe(interval), Duration.minutes(1)),
  batchSize: 20,
  concurrency: 4,
  claim: claimDue<ReceivingDomainRow>({
    table: "receiving_domains",
    dueColumn: "next_check_at",
    statuses: ["verified", "suspended"],
    lease: "2 minutes",
  }),
  handle: (row) => Effect.asVoid(ReceivingDomains.use((domains) => domains.recheck(row))),
})

/** The worker at DOMAIN_RECHECK_INTERVAL. */
export const receivingDomainRecheckLayer = Layer.unwrap(
  AppConfig.useSync((config) => workerLayer(receivingDomainRecheckWorker(config.domainRecheckInterval))),
)
