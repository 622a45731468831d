/**
 * The test app set up for account flows: captured mail and SMS, a movable clock, cheap
 * password hashing and roomy auth limits (all replaceable through `layers`), plus helpers that
 * go through the public API the way a client does.
 */
import { Layer } from "effect"
import type { Settings } from "../../effects/config.ts"
import { makeTestApp, type TestApp } from "./app.ts"
import { type ShiftedClock, shiftedClock } from "./clock.ts"
import { fastHashing, makeOutbox, type Outbox, roomyAuthLimits } from "./platform.ts"

export interface AuthTestApp {
  readonly api: TestApp
  readonly outbox: Outbox
  readonly clock: ShiftedClock
}

export interface AuthTestAppOptions {
  readonly settings?: Partial<Settings>
  /** Extra infrastructure; later layers win (e.g. the default AuthRateLimits). `never` accepts any layer: its output is contravariant. */
  readonly layers?: ReadonlyArray<Layer.Layer<never, never, never>>
  /** Keep mail and SMS in the in-memory outbox (default); false uses the adapters the settings choose. */
  readonly capture?: boolean
  /** Workers (webhook dispatcher, SMS sender, …) run when true; off by default. */
  readonly workers?: boolean
}

export const makeAuthTestApp = async (options: AuthTestAppOptions = {}): Promise<AuthTestApp> => {
  const outbox = makeOutbox()
  const clock = shiftedClock()
  const api = await makeTestApp({
    workers: options.workers ?? false,
    ...(options.settings ? { settings: options.settings } : {}),
    infrastructure: Layer.mergeAll(
      options.capture === false ? Layer.empty : outbox.layer,
      clock.layer,
      fastHashing,
      roomyAuthLimits,
      ...(options.layers ?? []),
    ),
  })
  return { api, outbox, clock }
}

let counter = 0
/** A unique, valid Tanzanian number (+2557…). */
export const freshPhone = (): string => `+2557${String(process.pid % 1000).padStart(3, "0")}${String(++counter).padStart(5, "0")}`
/** A unique email address. */
export const freshEmail = (): string => `user${++counter}-${process.pid}@example.co.tz`

export const PASSWORD = "correct horse battery"

export interface Registered {
  readonly token: string
  readonly refreshToken: string
  readonly user: { id: number; email: string | null; phone_number: string | null; [k: string]: unknown }
  readonly email: string
  readonly password: string
}

/** Registers through POST /api/auth/register (email only unless told otherwise) and checks the 200. */
export const register = async (api: TestApp, body: Record<string, unknown> = {}): Promise<Registered> => {
  const email = (body.email as string | undefined) ?? freshEmail()
  const res = await api.call("POST", "/api/auth/register", { body: { name: "Asha Mwinyi", password: PASSWORD, email, ...body } })
  if (res.status !== 200) throw new Error(`register failed: ${res.status} ${JSON.stringify(res.body)}`)
  return {
    token: res.body.data.token,
    refreshToken: res.body.data.refresh_token,
    user: res.body.data.user,
    email,
    password: (body.password as string | undefined) ?? PASSWORD,
  }
}
