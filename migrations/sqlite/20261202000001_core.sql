-- gadfly core schema (SQLite). Kept in lockstep with migrations/postgres.
create table campaigns (
    id text primary key,
    name text not null,
    mode text not null,
    status text not null default 'active',
    spec_path text not null,
    spec_toml text not null,
    spec_json text not null,
    protected_json text not null,
    created_at text not null
);

create table events (
    id integer primary key autoincrement,
    campaign_id text not null references campaigns(id),
    session_id text,
    kind text not null,
    idempotency_key text unique,
    payload text not null,
    created_at text not null
);
create index events_campaign on events(campaign_id, id);

create table evaluations (
    id integer primary key autoincrement,
    campaign_id text not null references campaigns(id),
    tree text not null,
    holds integer not null,
    geomean real,
    worst_scenario text,
    worst_speedup real,
    failing_count integer not null,
    body text not null,
    duration_ms integer not null,
    created_at text not null,
    unique (campaign_id, tree)
);

create table scenario_results (
    evaluation_id integer not null references evaluations(id),
    scenario text not null,
    present integer not null,
    correct integer not null,
    passes integer not null,
    speedup real,
    time_us real,
    baseline_us real,
    max_abs_err_ref real,
    max_abs_err_hi real,
    reasons text not null,
    primary key (evaluation_id, scenario)
);

create table questions (
    id integer primary key autoincrement,
    campaign_id text not null references campaigns(id),
    source text not null,
    bank_id text,
    moment text,
    text text not null,
    status text not null default 'queued',
    created_at text not null,
    delivered_at text,
    delivered_via text,
    objective_before real
);
create index questions_campaign on questions(campaign_id, status);

create table stop_attempts (
    id integer primary key autoincrement,
    campaign_id text not null references campaigns(id),
    event_id integer not null unique references events(id),
    session_id text,
    agent text not null,
    claim text,
    stop_hook_active integer not null,
    evaluation_id integer references evaluations(id),
    holds integer not null,
    decision text not null,
    reason text,
    question_id integer references questions(id),
    created_at text not null
);
create index stop_attempts_campaign on stop_attempts(campaign_id, id);
