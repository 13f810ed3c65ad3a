-- Campaign ownership when several daemons share one database: the daemon
-- that runs a campaign's agent holds its lease and renews it; when the
-- lease expires (the owner died), another daemon takes the campaign over
-- and resumes the run. Times are Unix milliseconds of the daemons' clocks.
create table leases (
    campaign_id text primary key references campaigns(id),
    owner text not null,
    expires_at_ms bigint not null,
    acquired_at text not null
);

alter table runs add column owner text;
