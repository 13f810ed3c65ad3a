-- Events are no longer announced by a trigger inside each inserting
-- transaction: NOTIFY takes a lock that PostgreSQL holds until the commit
-- is on disk, so every insert waited for the one before it. The daemon now
-- announces what it recorded after the commit, in batches, from a
-- connection of its own (src/store/live.rs), on the same channel.
drop trigger if exists events_notify on events;
drop function if exists gadfly_notify_event();
