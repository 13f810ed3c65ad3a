-- Agent runs that the daemon spawned (gadfly run), one row per run.
create table runs (
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    agent text not null,
    status text not null,
    session_id text,
    turns bigint not null default 0,
    outcome text,
    started_at text not null,
    ended_at text
);
create index runs_campaign on runs(campaign_id, id);
