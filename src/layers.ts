/**
 * Composition of every service and worker, shared by the process (src/main.ts), the operator
 * CLI (src/admin.ts) and the test app (test/support/app.ts). Infrastructure (config, database,
 * HTTP client, providers) comes in from outside so tests can swap adapters.
 *
 * Tiers: a service may depend on services of earlier tiers only.
 */
import { Effect, Layer, type ManagedRuntime } from "effect"
import { Accounts } from "../effects/accounts/service.ts"
import { agentSubscriber } from "../effects/agent/events.ts"
import { AgentJobs } from "../effects/agent/jobs.ts"
import { AgentConfigs } from "../effects/agent/service.ts"
import { ApiKeys } from "../effects/apikeys/service.ts"
import { GoogleIdentity } from "../effects/auth/google.ts"
import { Authenticator } from "../effects/auth/service.ts"
import { PaymentEvents } from "../effects/billing/payment-events.ts"
import { Billing } from "../effects/billing/service.ts"
import { Bounces } from "../effects/bounces/service.ts"
import { Topups } from "../effects/billing/topups.ts"
import { AppConfig, chosenProviders } from "../effects/config.ts"
import { InboundAddresses } from "../effects/addresses/service.ts"
import { Compliance } from "../effects/compliance/service.ts"
import { MessageEvents } from "../effects/ingest/events.ts"
import { OutboundDispatcher } from "../effects/outbound/dispatch.ts"
import { outboundSenderLayer } from "../effects/outbound/sender.ts"
import { Outbound } from "../effects/outbound/service.ts"
import { Reservations } from "../effects/ingest/admission.ts"
import { Recipients } from "../effects/ingest/recipients.ts"
import { Ingest } from "../effects/ingest/service.ts"
import { IngestWriter } from "../effects/ingest/writer.ts"
import { InboundMessages } from "../effects/messages/service.ts"
import { ReceivingDomains } from "../effects/receiving-domains/service.ts"
import { SandboxCredentials } from "../effects/sandbox/credentials.ts"
import { Sandbox } from "../effects/sandbox/service.ts"
import { SenderIdentities } from "../effects/sending-domains/identity.ts"
import { SendingDomains } from "../effects/sending-domains/service.ts"
import { WorkSignals } from "../effects/ports/WorkSignals.ts"
import { Database, type DbError } from "../effects/ports/Database.ts"
import { RateLimiter } from "../effects/ratelimit/service.ts"
import { SmsDeliveries } from "../effects/sms/delivery.ts"
import { smsSubscriber } from "../effects/sms/events.ts"
import { SmsNotifications } from "../effects/sms/service.ts"
import { Templates } from "../effects/templates/service.ts"
import { WebhookDeliveries } from "../effects/webhooks/delivery.ts"
import { endpointSubscriber, webhookSubscriber } from "../effects/webhooks/events.ts"
import { EventDeliveries } from "../effects/webhooks/event-deliveries.ts"
import { EventEndpoints } from "../effects/webhooks/endpoints.ts"
import { Webhooks } from "../effects/webhooks/service.ts"
import { messagePreparerLayer } from "./ingest/prepare-pool.ts"
import { dnsLayer } from "./providers/dns.ts"
import { outboundMailerLayer } from "./providers/outbound-mailer.ts"
import { SmtpMemory } from "./smtp/limits.ts"
import { receivingDomainRecheckLayer } from "./workers/receiving-domains.ts"
import { sendingDomainRecheckLayer } from "./workers/sending-domains.ts"
import { retentionWorkerLayer } from "./workers/retention.ts"
import { blobGarbageWorkerLayer } from "./workers/blob-garbage.ts"
import { fakePaymentGatewayLayer } from "./providers/payment-fake.ts"
import { paymentGatewayHttpLayer } from "./providers/payment-http.ts"
import { webhookHttpLayer } from "./providers/webhook-http.ts"
import { mimeBlobsLayer } from "./providers/blob-files.ts"
import { agentWorkerLayer } from "./workers/agent.ts"
import { outboundWorkerLayer } from "./workers/outbound.ts"
import { smsWorkerLayer } from "./workers/sms.ts"
import { eventWorkerLayer, webhookWorkerLayer } from "./workers/webhooks.ts"

/** The payment gateway: the live adapter, or the embedded fake (PAYMENT_PROVIDER, else PAYMENT_API_URL unset). */
const paymentGateway = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  return chosenProviders(config).payment === "http" ? paymentGatewayHttpLayer : fakePaymentGatewayLayer
}))

/** Core services with no dependency on other capabilities. */
const tier1 = Layer.mergeAll(
  Authenticator.layer,
  ApiKeys.layer,
  GoogleIdentity.layer,
  RateLimiter.layer,
  Billing.layer,
  paymentGateway,
  WorkSignals.layer,
  webhookHttpLayer,
  dnsLayer,
  outboundMailerLayer,
  SandboxCredentials.layer,
  Sandbox.layer,
  SmtpMemory.layer,
  mimeBlobsLayer,
)

/** Capabilities that build on tier 1 (e.g. billing charges, accounts). */
const tier2 = Layer.mergeAll(
  Accounts.layer,
  Compliance.layer,
  ReceivingDomains.layer,
  SenderIdentities.layer,
  SendingDomains.layer,
  InboundMessages.layer,
  Topups.layer,
  PaymentEvents.layer,
  Webhooks.layer.pipe(Layer.provideMerge(WebhookDeliveries.layer)),
  SmsNotifications.layer,
  SmsDeliveries.layer,
  Templates.layer,
  AgentJobs.layer,
  EventEndpoints.layer,
  EventDeliveries.layer,
)

/**
 * Outbound mail (the From rules come from tier 2's SenderIdentities). Everything after it may
 * send through OutboundSender, the agent's auto-replies included.
 */
const outbound = outboundSenderLayer.pipe(
  Layer.provideMerge(Outbound.layer),
  Layer.provideMerge(OutboundDispatcher.layer),
  // Bounces and complaints of outbound mail; the MX intake (tier 3) calls it.
  Layer.provideMerge(Bounces.layer),
)

/**
 * The subscribers of stored inbound messages (webhooks, SMS, agent), combined into the one
 * MessageEvents service ingest calls. Built on tiers 1–2.
 */
const messageEvents = Layer.effect(
  MessageEvents,
  Effect.gen(function*() {
    const subscribers = [yield* webhookSubscriber, yield* smsSubscriber, yield* agentSubscriber, yield* endpointSubscriber]
    return MessageEvents.of(MessageEvents.combine(yield* Database, subscribers))
  }),
)

/**
 * Where received mail is authenticated and parsed: INGEST_THREADS worker threads and the event
 * loop (INGEST_LOOP_BYTES, INGEST_REUSED_ON_LOOP).
 */
const messagePreparer = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  return messagePreparerLayer(config.ingestThreads, { loopBytes: config.ingestLoopBytes, reusedOnLoop: config.ingestReusedOnLoop })
}))

/** Capabilities that build on everything above (inbound ingest, outbound, …). */
const tier3 = Layer.mergeAll(
  // Ingest: RCPT lookups, the holds on money promised at RCPT, the prepare threads and the one
  // writer fiber (actor).
  Ingest.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(Reservations.layer, messagePreparer, IngestWriter.layer)),
    Layer.provideMerge(Recipients.layer),
  ),
  InboundAddresses.layer,
  AgentConfigs.layer,
  Layer.empty,
)

export const servicesLayer = tier3.pipe(
  Layer.provideMerge(messageEvents),
  Layer.provideMerge(outbound),
  Layer.provideMerge(tier2),
  Layer.provideMerge(tier1),
)

/** Long-lived workers (each a Layer from src/workers/worker.ts). */
export const workersLayer = Layer.mergeAll(
  retentionWorkerLayer,
  blobGarbageWorkerLayer,
  receivingDomainRecheckLayer,
  sendingDomainRecheckLayer,
  Layer.empty,
  webhookWorkerLayer,
  smsWorkerLayer,
  outboundWorkerLayer,
  agentWorkerLayer,
  eventWorkerLayer,
)

/** What the services need from outside: settings, the database, the HTTP client, the platform's providers. */
export type Infrastructure = Layer.Services<typeof servicesLayer>

/**
 * The runtime's context: every service a route handler, SMTP step, worker or admin command may
 * ask for. Derived from the layers, so a handler that needs a service no layer provides fails
 * to compile instead of failing at run time.
 */
export type AppServices = Layer.Success<typeof servicesLayer> | Infrastructure

/** The one runtime the process runs everything on (src/runtime.ts builds it); building it fails only on the database. */
export type AppRuntime = ManagedRuntime.ManagedRuntime<AppServices, DbError>
