-- The moments left without a question (`moment.withheld` events, issue #35
-- item 5) are read across every campaign by `gadfly bank stats` and by
-- question selection: their base rate is the bank's control arm. A partial
-- index keeps that read a seek among these rare rows, and costs nothing
-- to the other kinds' writes. Kept in lockstep with the other engine's.
create index if not exists events_withheld on events(id) where kind = 'moment.withheld';
