-- Checkpoints of durable runs and the replica executing each run, so a
-- run paused or crashed on one replica resumes on any other
-- (capabilities/pgstate/checkpoints.go, docs/scaling.md).
CREATE TABLE kiln_checkpoints (
    run_id      text        PRIMARY KEY,
    workflow    text,                  -- the workflow's name: a replica lists its own workflow's runs
    state       text CHECK (state IN ('paused', 'incomplete', 'errored')),
    data        bytea,                 -- the checkpoint as runtime.EncodeCheckpoint writes it (redacted); NULL while a new run is claimed before its first checkpoint
    saved_at    timestamptz,
    owner       text,                  -- replica id executing the run
    lease_until timestamptz            -- the owner renews it; past it the run is free to resume
);
CREATE INDEX kiln_checkpoints_owner ON kiln_checkpoints (owner) WHERE owner IS NOT NULL;
CREATE INDEX kiln_checkpoints_workflow ON kiln_checkpoints (workflow, saved_at) WHERE data IS NOT NULL;
