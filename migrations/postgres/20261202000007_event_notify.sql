-- Several daemons on one database: each event recorded is announced on the
-- channel gadfly_events ("campaign_id id"), in the inserting transaction, so
-- every daemon's live views (the console's event stream) show what the
-- others record.
create function gadfly_notify_event() returns trigger as $$
begin
    perform pg_notify('gadfly_events', new.campaign_id || ' ' || new.id);
    return null;
end;
$$ language plpgsql;

create trigger events_notify after insert on events
    for each row execute function gadfly_notify_event();
