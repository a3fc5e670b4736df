#!/bin/sh
# The daily report, written once a day by whichever host's start (cron, on every host) comes
# first; the others find the day's record and run nothing:
#
#   fencelock run --once reports/daily --every 1d -- ./daily-report.sh
#
# `fencelock run` passes the lock's fence in FENCELOCK_FENCE. The first statement raises the
# resource's fence in the `fences` table, or returns no row when a newer holder has already
# written (this holder was paused past its lease): then `\gset` fails, psql stops with exit 3,
# and the transaction is rolled back, report and all. psql connects with the usual PG*
# variables (PGHOST, PGPORT, PGUSER, PGDATABASE; the password in ~/.pgpass, never on a
# command line).
set -eu
exec psql -X -q -v ON_ERROR_STOP=1 -v fence="$FENCELOCK_FENCE" <<'SQL'
BEGIN;
INSERT INTO fences (resource, fence) VALUES ('reports/daily', :fence)
  ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence
  WHERE fences.fence <= EXCLUDED.fence
  RETURNING fence AS accepted \gset
INSERT INTO reports (day, fence) VALUES (current_date, :fence);
COMMIT;
SQL
