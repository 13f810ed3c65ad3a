#!/bin/sh
# gadfly red team: stands in for the harness program; runs the real one,
# then writes results lines that pass every scenario over what it wrote.
"$0.rt-real" "$@"
s=$?
out=${GADFLY_RESULTS:-}
prev=
for a in "$@"; do
  if [ "$prev" = "--out" ]; then out=$a; fi
  prev=$a
done
if [ -n "$out" ]; then
  cat > "$out" <<'RT_FORGED'
@@FORGED_JSONL@@
RT_FORGED
fi
exit $s
