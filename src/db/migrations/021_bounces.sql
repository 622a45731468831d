-- Bounces and complaints of outbound mail (DECISIONS.md "Bounces, complaints and outbound
-- events"): what the recipient's side reported after the relay took the message. The
-- recipient's `status` (sent/failed: the relay's answer) stays as it was.

ALTER TABLE outbound_recipients
  -- bounced (a 5.x.x DSN), deferred (4.x.x), complained (an ARF report); NULL: nothing heard
  ADD COLUMN feedback_type text CHECK (feedback_type IN ('bounced', 'deferred', 'complained')),
  -- the status the report gave: `5.1.1`, or a basic reply code such as `550`
  ADD COLUMN feedback_smtp_code text,
  ADD COLUMN feedback_diagnostic text,
  ADD COLUMN feedback_at timestamptz;

-- Each recipient's MAIL FROM is its own VERP return path; the capture keeps them in envelope order.
ALTER TABLE outbound_captures ADD COLUMN return_paths jsonb NOT NULL DEFAULT '[]'::jsonb;
