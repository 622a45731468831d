-- The wallet: an append-only ledger plus one balance row per account. The balance changes only
-- together with a ledger entry, by a conditional update that cannot go below zero.

CREATE TABLE wallets (
  user_id      bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  balance_tzs  bigint NOT NULL DEFAULT 0 CHECK (balance_tzs >= 0),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ledger_entries (
  id                 bigserial PRIMARY KEY,
  user_id            bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- credit (top-up), debit (a charge), refund (a charge given back), adjustment (operator)
  kind               text NOT NULL CHECK (kind IN ('credit', 'debit', 'refund', 'adjustment')),
  -- signed: positive adds to the balance, negative takes from it
  amount_tzs         bigint NOT NULL CHECK (amount_tzs <> 0),
  balance_after_tzs  bigint NOT NULL CHECK (balance_after_tzs >= 0),
  -- what caused it: inbound_message, outbound_message, topup, operator …
  reference_type     text NOT NULL,
  reference_id       text,
  description        text NOT NULL DEFAULT '',
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_user_id_id ON ledger_entries (user_id, id DESC);
CREATE INDEX ledger_entries_reference ON ledger_entries (reference_type, reference_id);
