-- PostgreSQL announces each new event to the other daemons (see the
-- postgres migration of the same name). One daemon uses a SQLite file, so
-- there is nothing to announce here.
select 1;
