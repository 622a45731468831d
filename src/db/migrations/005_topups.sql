-- Top-ups (money coming into the wallet through the payment gateway) and the log of every
-- status event the gateway sent about them.

CREATE TABLE topups (
  id                  bigserial PRIMARY KEY,
  user_id             bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  amount_tzs          bigint NOT NULL CHECK (amount_tzs BETWEEN 2000 AND 1000000000),
  -- checkout: hosted page (card, mobile money); ussd_push: prompt on the account's verified phone
  channel             text NOT NULL CHECK (channel IN ('checkout', 'ussd_push')),
  -- pending until the gateway reports an outcome; only pending moves (SPEC.md Topup states)
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'failed')),
  -- ours, sent to the gateway; random so it cannot be guessed from the id
  reference           text NOT NULL UNIQUE,
  -- the gateway's id of the payment, known once it answered; events are matched on it
  provider_reference  text UNIQUE,
  phone_number        text,
  checkout_url        text,
  payment_link_url    text,
  -- why it failed: the gateway event (payment.expired …) or gateway_error when starting it failed
  failure_reason      text,
  expires_at          timestamptz NOT NULL,
  completed_at        timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX topups_user_id_id ON topups (user_id, id DESC);

-- Every signed delivery the gateway made, kept as received (audit and reconciliation).
CREATE TABLE payment_events (
  id                  bigserial PRIMARY KEY,
  -- the gateway's event id; the idempotency key
  event_id            text NOT NULL,
  event               text NOT NULL,
  provider_reference  text NOT NULL,
  amount_tzs          bigint NOT NULL,
  occurred_at         timestamptz,
  topup_id            bigint REFERENCES topups(id) ON DELETE CASCADE,
  -- applied: moved the top-up; ignored: the top-up was no longer pending; duplicate: event id
  -- already accepted; rejected outcomes changed nothing and may be retried by the gateway
  outcome             text NOT NULL CHECK (outcome IN
                        ('applied', 'ignored', 'duplicate', 'amount_mismatch', 'unknown_reference', 'unknown_event')),
  payload             jsonb NOT NULL,
  received_at         timestamptz NOT NULL DEFAULT now()
);
-- An event id is accepted once; replays are logged as duplicates. Rejected deliveries do not
-- claim the id, so the gateway's retry can still succeed (e.g. once the reference is known).
CREATE UNIQUE INDEX payment_events_event_id_accepted ON payment_events (event_id) WHERE outcome IN ('applied', 'ignored');
CREATE INDEX payment_events_topup_id ON payment_events (topup_id);

-- The embedded fake gateway's own state (used only while PAYMENT_API_URL is unset): it acts like
-- an external gateway, so it keeps its payments apart from ours and survives restarts.
CREATE TABLE fake_gateway_payments (
  provider_reference  text PRIMARY KEY,
  reference           text NOT NULL,
  amount_tzs          bigint NOT NULL,
  channel             text NOT NULL CHECK (channel IN ('checkout', 'ussd_push')),
  phone_number        text,
  callback_url        text NOT NULL,
  expires_at          timestamptz NOT NULL,
  -- open until a button is pressed; then the event it emitted (re-sent on a second press)
  status              text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'failed', 'expired')),
  event_id            text,
  event_body          text,
  created_at          timestamptz NOT NULL DEFAULT now()
);

-- A top-up is credited at most once, whatever the application does (per account, so unrelated
-- test fixtures that credit `topup` references of their own do not collide).
CREATE UNIQUE INDEX ledger_entries_topup_credit ON ledger_entries (user_id, reference_id)
  WHERE reference_type = 'topup' AND kind = 'credit';
