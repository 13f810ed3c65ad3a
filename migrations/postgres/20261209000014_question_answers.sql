-- Whether a delivered question was answered, and by what (issue #35 item
-- 4). Plain text from the agent never answers; fresh evidence does: a new
-- evaluation of a workspace tree other than the one evaluated last before
-- the question was delivered, or evidence files the agent filed for it
-- (`gadfly answer`). One left unanswered is asked again in another form,
-- then escalated to a person.
--   answered_at, answered_by   when, and 'evaluation' or 'artifact';
--   answer_detail              what answered it, for a person (the trees,
--                              or the files' names);
--   answer_evaluation_id       the evaluation that answered it;
--   baseline_tree              the tree the workspace had presented last
--                              when the question was delivered (null: none
--                              yet, then any new evaluation answers it);
--   tracked_at                 when its delivery was recorded with its
--                              baseline and session: only from then on do
--                              stops count as its turns (a stop racing
--                              with its delivery does not);
--   delivered_session          the agent session it was delivered to
--                              (null: a spawned agent's stdin, any);
--   turns_open                 stop attempts of that session judged since
--                              its delivery while it stayed unanswered;
--   reask_of                   a re-ask: the question it asks again;
--   reasked_at                 when it was asked again (once, even when
--                              two stops find it due at the same time);
--   escalated_at               when the question (its first form) was
--                              escalated after its re-ask missed too.
-- Kept in lockstep with migrations/sqlite.
alter table questions add column answered_at text;
alter table questions add column answered_by text;
alter table questions add column answer_detail text;
alter table questions add column answer_evaluation_id bigint;
alter table questions add column baseline_tree text;
alter table questions add column delivered_session text;
alter table questions add column tracked_at text;
alter table questions add column turns_open bigint not null default 0;
alter table questions add column reask_of bigint references questions(id);
alter table questions add column reasked_at text;
alter table questions add column escalated_at text;
