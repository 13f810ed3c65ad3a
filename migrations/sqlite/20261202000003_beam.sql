-- The beam: candidate families of a campaign (git refs under refs/heads/beam/)
-- and the evaluations of each.
create table beam_families (
    campaign_id text not null references campaigns(id),
    family text not null,
    ref text not null,
    status text not null default 'alive',
    reason text,
    created_at text not null,
    updated_at text not null,
    primary key (campaign_id, family)
);

create table beam_evaluations (
    id integer primary key autoincrement,
    campaign_id text not null references campaigns(id),
    family text not null,
    commit_id text not null,
    evaluation_id integer not null references evaluations(id),
    created_at text not null,
    unique (campaign_id, family, commit_id)
);
