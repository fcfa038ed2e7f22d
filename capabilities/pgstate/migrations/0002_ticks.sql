-- Schedule ticks claimed by one replica of the fleet: a cron or interval
-- trigger fires a slot only on the replica whose insert wins.
CREATE TABLE kiln_ticks (
    trigger    text        NOT NULL,  -- workflow name and trigger label
    slot       timestamptz NOT NULL,  -- the scheduled time of the tick
    owner      text        NOT NULL,  -- replica id that fires it
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trigger, slot)
);
CREATE INDEX kiln_ticks_slot ON kiln_ticks (slot);
