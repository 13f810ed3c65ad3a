-- Evaluation jobs: a campaign whose [harness] names tags (gpu = "h200") is
-- evaluated by `gadfly worker` processes, not the daemon. The daemon queues
-- the tree (a tar, hex text), a worker whose tags include the job's claims
-- it under a lease it renews; a lease that runs out sends the job back to
-- the queue (attempts + 1, lost + 1) until max_attempts, then it fails with
-- its reason. Kept in lockstep with migrations/sqlite.
create table eval_jobs (
    id bigserial primary key,
    campaign_id text not null references campaigns(id),
    tree text not null,
    seed bigint not null,
    tags_json text not null,
    archive_hex text not null,
    status text not null default 'queued',
    attempts bigint not null default 0,
    max_attempts bigint not null default 3,
    lost bigint not null default 0,
    worker text,
    lease_expires_at text,
    evaluation_json text,
    error text,
    created_at text not null,
    updated_at text not null
);
create index eval_jobs_status on eval_jobs(status, id);
create index eval_jobs_tree on eval_jobs(campaign_id, tree, seed);
