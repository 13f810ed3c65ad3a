#!/bin/bash
# glibc's own account of the memory bench's daemon, next to its resident set.
#
#   BENCH_MEMORY_EVENTS=5000000 cargo bench --bench overhead -- memory | tee mem.txt &
#   benches/arena_totals.sh mem.txt
#
# Each time the bench prints a row (events, RSS, anon, ...), this attaches
# gdb to the daemon, calls malloc_stats() (which glibc writes to the
# daemon's stderr, the bench's daemon log) and prints, beside the row, the
# bytes the allocator's arenas took from the system and the bytes in use.
# Needs gdb; glibc only. The attach stops the daemon for about a second.
# The executable is named through /proc, so a rebuild meanwhile (which
# replaces the file) does not leave gdb without glibc's symbols.
set -u
rows=${1:?usage: arena_totals.sh FILE (the memory bench output, growing)}
seen=0
printf '%12s %10s %10s %14s %14s\n' events "RSS MiB" "anon MiB" "arenas MB" "in use MB"
while sleep 2; do
  grep -q "against recorded" "$rows" 2>/dev/null && break
  n=$(grep -cE '^ +[0-9]+ +[0-9.]+ +[0-9.]+' "$rows" 2>/dev/null) || continue
  [ "$n" -le "$seen" ] && continue
  seen=$n
  pid=$(pgrep -nx gadfly) || continue
  log=$(readlink "/proc/$pid/fd/2") || continue
  before=$(wc -c <"$log")
  gdb -batch -ex 'call (void)malloc_stats()' "/proc/$pid/exe" "$pid" >/dev/null 2>&1
  sleep 0.5
  totals=$(tail -c +$((before + 1)) "$log" | grep -A2 '^Total' | grep -oE '[0-9]+$' | tr '\n' ' ')
  read -r system in_use <<<"$totals"
  read -r events rss anon _ <<<"$(grep -E '^ +[0-9]+ +[0-9.]+ +[0-9.]+' "$rows" | tail -1)"
  awk -v e="$events" -v r="$rss" -v a="$anon" -v s="${system:-0}" -v u="${in_use:-0}" \
    'BEGIN { printf "%12s %10s %10s %14.1f %14.1f\n", e, r, a, s / 1e6, u / 1e6 }'
done
