-- Idempotency claims and recorded replies of keyed routes, shared by
-- every replica (capabilities/pgstate, docs/scaling.md).
CREATE TABLE kiln_claims (
    key_hash     bytea       PRIMARY KEY,  -- sha256(scope || '\n' || key): the key itself is never stored
    scope        text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('in_flight', 'done')),
    owner        text,                     -- replica id holding an in_flight claim
    lease_until  timestamptz,              -- in_flight: the owner renews it; past it the claim is free
    expires_at   timestamptz,              -- done: the reply is replayed until then
    status       integer,
    content_type text,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX kiln_claims_owner ON kiln_claims (owner) WHERE state = 'in_flight';
CREATE INDEX kiln_claims_expires ON kiln_claims (expires_at) WHERE state = 'done';
