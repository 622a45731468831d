/** Sending-domain re-check (a suspended domain cannot be sent from until its records return). */
import type { Duration } from "effect"
import type { SendingDomainRow } from "../../effects/sending-domains/schema.ts"
import { SendingDomains } from "../../effects/sending-domains/service.ts"
import { type DomainRecheck, domainRecheckLayer, domainRecheckWorker } from "./domain-recheck.ts"

const recheck: DomainRecheck<SendingDomainRow, SendingDomains> = {
  name: "sending-domain-recheck",
  table: "sending_domains",
  recheck: (row) => SendingDomains.use((domains) => domains.recheck(row)),
}

export const sendingDomainRecheckWorker = (interval: Duration.Input) => domainRecheckWorker(recheck, interval)
export const sendingDomainRecheckLayer = domainRecheckLayer(recheck)
