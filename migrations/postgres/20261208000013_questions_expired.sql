-- A question that waited and never reached the agent (the stop was
-- allowed first) is marked expired, with when and why, instead of waiting
-- for ever as queued (issue #32).
alter table questions add column expired_at text;
alter table questions add column expired_reason text;
