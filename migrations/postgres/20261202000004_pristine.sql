-- gadfly's pristine copy of each campaign's protected files (the harness,
-- the reference), taken from the workspace's tree when the campaign is
-- created. Every evaluation runs with these, whatever the agent did to its
-- own copies (which are still hashed and reported as violations).
create table pristine_files (
    campaign_id text not null references campaigns(id),
    path text not null,
    sha256 text not null,
    mode bigint not null,
    content_hex text not null,
    primary key (campaign_id, path)
);
