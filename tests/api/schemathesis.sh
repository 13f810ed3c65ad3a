#!/usr/bin/env bash
# Schema-driven fuzzing of the HTTP API: a real daemon (debug build, SQLite
# in a temporary data dir, one campaign made from examples/qr-cpu), tested
# by schemathesis against the OpenAPI description it serves. Fails when any
# request gets a 5xx, a status the description does not list, a body or
# content type that does not match it, an undocumented method that is not
# refused with 405, or an operation that answers without the token.
# Needs the network only for the PyPI install (a venv in target/schemathesis,
# kept between runs). GADFLY_FUZZ_EXAMPLES (default 100) bounds the test
# cases per operation and phase; GADFLY_FUZZ_CHECKS overrides the checks.
#
# Not fuzzed (both named in the summary):
#   POST /campaigns/{id}/runs    spawns real agent processes (the pinned CLIs are installed in CI)
#   GET  /campaigns/{id}/events  a Server-Sent Events stream: it never ends by design
# tests/api_errors.rs sends malformed requests to both. Evaluations (POST
# evaluate, stop hooks, the beam) are fuzzed: the copy has no harness/cpu, so
# each build fails in milliseconds and is recorded as a failing verdict.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES=${GADFLY_FUZZ_EXAMPLES:-100}
venv=$PWD/target/schemathesis/venv
st=$venv/bin/st

if ! "$st" --version 2>/dev/null | grep -qx "st, version $SCHEMATHESIS_VERSION"; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv"; then
    # Debian's python3 keeps venv in a package of its own.
    apt-get install -y -qq python3-venv && python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
cargo build --locked --quiet
gadfly=$PWD/target/debug/gadfly

tmp=$(mktemp -d)
data=$tmp/data
report=$tmp/report
mkdir -p "$data" "$report"
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The example campaign on a copy whose workspace is a git repository of its
# own (beam tags are refs in the workspace: never in this repository).
cp -r examples/qr-cpu "$tmp/qr-cpu"
rm -rf "$tmp/qr-cpu/workspace/build"
git -C "$tmp/qr-cpu/workspace" init -q
git -C "$tmp/qr-cpu/workspace" add -A
git -C "$tmp/qr-cpu/workspace" -c user.name=gadfly -c user.email=gadfly@localhost commit -qm initial

"$gadfly" serve --listen 127.0.0.1:0 --data-dir "$data" 2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 1 300); do
  [ -s "$data/daemon.json" ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$data/daemon.json" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log"; echo "schemathesis.sh: the daemon exited" >&2; exit 1; }
  sleep 0.1
done
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$data/daemon.json")
token=$(cat "$data/token")
export GADFLY_URL=$url GADFLY_TOKEN=$token
campaign=$(GADFLY_SPOOL_DIR="$tmp/spool" "$gadfly" campaign create --no-calibrate "$tmp/qr-cpu/campaign.toml")
echo "schemathesis.sh: daemon at $url, campaign $campaign"

# Path parameter `id` is the real campaign, so every operation gets past the
# lookup; the integration test sends unknown and odd ids.
cat >"$tmp/schemathesis.toml" <<EOF
[parameters]
"path.id" = "$campaign"
EOF

# Hypothesis's lambda descriptions can crash on CPython 3.11 (gh-106905);
# the hooks module makes them "<unknown>" instead (its docstring says why).
export SCHEMATHESIS_HOOKS=$PWD/tests/api/schemathesis_hooks.py

# Run from the temporary folder: schemathesis and hypothesis keep caches
# (.schemathesis/, .hypothesis/) in the working directory.
cd "$tmp"
started=$(date +%s)
# One run of the fuzzer; its report in "$report".
fuzz() {
  rm -rf "$report" && mkdir -p "$report"
  set +e
  "$st" --config-file "$tmp/schemathesis.toml" --no-color run "$url/api/v1/openapi.json" \
    --header "Authorization: Bearer $token" \
    --checks ${GADFLY_FUZZ_CHECKS:-not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance,unsupported_method,ignored_auth} \
    --phases examples,coverage,fuzzing \
    --max-examples "$MAX_EXAMPLES" \
    --seed 7 \
    --workers 2 \
    --request-timeout 60 \
    --generation-database none \
    --exclude-operation-id start_run \
    --exclude-operation-id stream_events \
    --report har,junit --report-dir "$report"
  status=$?
  set -e
}
# What the report says: requests, failed checks, the fuzzer's own errors, 5xx.
tally() {
  requests=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["log"]["entries"]))' "$report"/har-*.json 2>/dev/null || echo "?")
  read -r failures tool_errors < <(python3 - "$report" <<'COUNT' 2>/dev/null || echo "? ?"
import glob, sys, xml.etree.ElementTree as ET
n = {"failure": 0, "error": 0}
for f in glob.glob(sys.argv[1] + "/*.xml"):
    for case in ET.parse(f).getroot().iter("testcase"):
        for c in case:
            if c.tag in n:
                n[c.tag] += 1
print(n["failure"], n["error"])
COUNT
)
  server_errors=$(python3 -c 'import json,sys; print(sum(e["response"]["status"] >= 500 for e in json.load(open(sys.argv[1]))["log"]["entries"]))' "$report"/har-*.json 2>/dev/null || echo "?")
}
fuzz
tally
# The fuzzer itself crashed (a Python error inside hypothesis, such as
# CPython 3.11's "AST constructor recursion depth mismatch"), with no check
# failed and no 5xx: no verdict on the daemon, so it runs once more, and
# says so. A failed check or a 5xx is never retried.
if [ "$status" -ne 0 ] && [ "$failures" = 0 ] && [ "$server_errors" = 0 ] && [ "$tool_errors" != 0 ]; then
  echo "schemathesis.sh: the fuzzer crashed by itself ($tool_errors error(s), no failed check, no 5xx): running it once more"
  fuzz
  tally
fi
elapsed=$(($(date +%s) - started))
echo "schemathesis.sh: $requests requests, $failures failing operations, $tool_errors errors of the fuzzer itself, $server_errors responses with a 5xx, ${elapsed}s (schemathesis exit $status)"
echo "schemathesis.sh: not fuzzed: POST /campaigns/{id}/runs (spawns agents), GET /campaigns/{id}/events (an endless stream)"
if [ "$status" -ne 0 ]; then
  echo "--- daemon log (last 40 lines)"
  tail -n 40 "$tmp/daemon.log"
fi
exit "$status"
