-- PostgreSQL drops its per-row announcement trigger in the migration of the
-- same name; SQLite never had one.
select 1;
