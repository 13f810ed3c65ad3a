-- A campaign can be archived (issue #32): hidden from the campaign lists,
-- nothing it recorded removed. NULL while it is not archived, else when it
-- was archived (the time format of every other column). Kept in lockstep
-- with the other engine's migration of the same name.
alter table campaigns add column archived_at text;
