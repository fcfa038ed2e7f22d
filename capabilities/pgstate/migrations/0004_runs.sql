-- Status records of runs accepted by async routes, answered by
-- GET /v1/runs/{id} on any replica (capabilities/pgstate/runs.go).
CREATE TABLE kiln_runs (
    id         text        PRIMARY KEY,
    record     bytea       NOT NULL,  -- runtime.RunRecord as JSON (its outcome already redacted)
    expires_at timestamptz NOT NULL
);
CREATE INDEX kiln_runs_expires ON kiln_runs (expires_at);
