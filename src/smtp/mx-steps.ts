/**
 * The MX's steps as smtp-server's handlers take them, run on the event loop: the same for the MX
 * whose protocol runs there (./mx.ts) and for the one whose protocol runs on a thread of its own
 * (./mx-threaded.ts), so both answer alike. What each step decides is ./session.ts.
 */
import { isEmpty } from "../../effects/ingest/admission.ts"
import type { Delivery } from "../../effects/ingest/service.ts"
import type { AppRuntime } from "../layers.ts"
import { stepRunner } from "./common.ts"
import { endTransaction, type MxSessionState, onMailFrom, onMessage, onRecipient } from "./session.ts"

type Done = (err: Error | null) => void

export const mxSteps = (runtime: AppRuntime) => {
  const run = stepRunner(runtime, "mx")
  return {
    /** MAIL FROM. Most transactions start with nothing held (the last one ended at its DATA): no step to run. */
    mail: (state: MxSessionState, done: Done) => (isEmpty(state.envelope) ? done(null) : run(onMailFrom(state), (err) => done(err))),
    rcpt: (state: MxSessionState, address: string, done: Done) => run(onRecipient(state, address), (err) => done(err)),
    /** The end of DATA; `finish` gives back the message's bytes once it is answered. */
    data: (
      state: MxSessionState,
      delivery: Omit<Delivery, "destinations" | "returnPaths">,
      finish: () => void,
      done: (err: Error | null, text?: string) => void,
    ) =>
      run(onMessage(state, delivery), (err, text) => {
        finish()
        done(err, text)
      }),
    /** The connection closed: what its transaction still held is let go. */
    close: (state: MxSessionState | undefined) => {
      if (state && !isEmpty(state.envelope)) runtime.runFork(endTransaction(state))
    },
  }
}
