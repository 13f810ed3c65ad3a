-- gadfly core schema (PostgreSQL). Kept in lockstep with migrations/sqlite.
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
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    session_id text,
    kind text not null,
    idempotency_key text unique,
    payload text not null,
    created_at text not null
);
create index events_campaign on events(campaign_id, id);

create table evaluations (
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    tree text not null,
    holds bigint not null,
    geomean double precision,
    worst_scenario text,
    worst_speedup double precision,
    failing_count bigint not null,
    body text not null,
    duration_ms bigint not null,
    created_at text not null,
    unique (campaign_id, tree)
);

create table scenario_results (
    evaluation_id bigint not null references evaluations(id),
    scenario text not null,
    present bigint not null,
    correct bigint not null,
    passes bigint not null,
    speedup double precision,
    time_us double precision,
    baseline_us double precision,
    max_abs_err_ref double precision,
    max_abs_err_hi double precision,
    reasons text not null,
    primary key (evaluation_id, scenario)
);

create table questions (
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    source text not null,
    bank_id text,
    moment text,
    text text not null,
    status text not null default 'queued',
    created_at text not null,
    delivered_at text,
    delivered_via text,
    objective_before double precision
);
create index questions_campaign on questions(campaign_id, status);

create table stop_attempts (
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    event_id bigint not null unique references events(id),
    session_id text,
    agent text not null,
    claim text,
    stop_hook_active bigint not null,
    evaluation_id bigint references evaluations(id),
    holds bigint not null,
    decision text not null,
    reason text,
    question_id bigint references questions(id),
    created_at text not null
);
create index stop_attempts_campaign on stop_attempts(campaign_id, id);
