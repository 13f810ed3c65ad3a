-- Whose candidate an evaluation measured, and the workspace's own order of
-- them (issue #32): the campaign's headline, figures and progress are the
-- workspace's, never a beam family's candidate nor gadfly's re-check row.
--   origin         'workspace', 'beam' (only a beam family's candidate), or
--                  'recheck' (gadfly's re-evaluation of a suspicious gain);
--   workspace_seq  when the workspace last presented this tree (a stop, an
--                  `eval`), in order; null for a tree it never presented. A
--                  tree the workspace comes back to (a revert, a beam branch
--                  checked out) is answered from the store and moves up;
--   incorrect      1 when its figures are no result: a scenario incorrect or
--                  missing, or the evaluation itself failed.
-- Kept in lockstep with migrations/postgres.
alter table evaluations add column origin text not null default 'workspace';
alter table evaluations add column workspace_seq integer;
alter table evaluations add column incorrect integer not null default 0;

-- Rows written before: a re-check is known by its tree key; a beam
-- candidate by its family's record, unless a stop attempt was judged on it
-- (then the workspace presented it too). The workspace's own rows keep
-- their order of creation.
update evaluations set origin = 'recheck' where tree like '%+recheck-%';
update evaluations set origin = 'beam'
 where origin = 'workspace'
   and id in (select evaluation_id from beam_evaluations)
   and id not in (select evaluation_id from stop_attempts where evaluation_id is not null);
update evaluations set workspace_seq = id where origin = 'workspace';
-- Incorrect: a scenario incorrect or missing, a constraint violated, or a
-- gain that gadfly's re-check rejected (a failed build or run leaves every
-- scenario missing).
update evaluations set incorrect = 1
 where exists (select 1 from scenario_results r
                where r.evaluation_id = evaluations.id and (r.present = 0 or r.correct = 0))
    or body not like '%"violations":[]%'
    or body like '%the gain did not survive gadfly''s re-evaluation%';

create index evaluations_workspace on evaluations(campaign_id, workspace_seq);
