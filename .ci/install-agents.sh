#!/usr/bin/env bash
# Installs the real agent CLIs that tests/agent_claude_code.rs and
# tests/agent_codex.rs drive against a mock model server, pinned to the
# versions those tests were written against, into a cache folder outside git
# that survives between CI steps:
#
#   ${GADFLY_AGENTS_DIR:-$HOME/.cache/gadfly-agents}/node_modules/.bin/{claude,codex}
#
# Idempotent: when both packages are already there at the pinned versions and
# their binaries run, it installs nothing. Needs node and npm (Node 20 is
# enough: Claude Code 2.1.332 declares node >= 22 but ships a native binary,
# so only the version pin matters; an unpinned install on Node 20 would
# resolve an older release).
set -euo pipefail

CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.171.0

dir="${GADFLY_AGENTS_DIR:-$HOME/.cache/gadfly-agents}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

command -v npm >/dev/null || { echo "install-agents: npm is not installed (Node.js 20 or later is needed)" >&2; exit 1; }

# The version of an installed package, or nothing.
installed() {
  local manifest="$dir/node_modules/$1/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$manifest" 2>/dev/null || true
}

# True when the binary exists and answers --version.
runs() {
  [ -x "$dir/node_modules/.bin/$1" ] && "$dir/node_modules/.bin/$1" --version >/dev/null 2>&1
}

want=()
if [ "$(installed @anthropic-ai/claude-code)" != "$CLAUDE_VERSION" ] || ! runs claude; then
  want+=("@anthropic-ai/claude-code@$CLAUDE_VERSION")
fi
if [ "$(installed @openai/codex)" != "$CODEX_VERSION" ] || ! runs codex; then
  want+=("@openai/codex@$CODEX_VERSION")
fi

if [ ${#want[@]} -eq 0 ]; then
  echo "install-agents: already installed in $dir"
else
  echo "install-agents: installing ${want[*]} into $dir"
  # A package.json of our own keeps npm from walking up to another project.
  [ -f "$dir/package.json" ] || echo '{"name":"gadfly-agents","private":true}' > "$dir/package.json"
  # Optional dependencies carry the native binaries: never omit them.
  # engine-strict off: Claude Code's engines field says node >= 22.
  npm install --prefix "$dir" --save-exact --no-audit --no-fund --engine-strict=false \
    --include=optional --loglevel=error "${want[@]}"
fi

fail=0
for pair in "claude:@anthropic-ai/claude-code:$CLAUDE_VERSION" "codex:@openai/codex:$CODEX_VERSION"; do
  IFS=: read -r bin pkg version <<<"$pair"
  got="$(installed "$pkg")"
  if [ "$got" != "$version" ]; then
    echo "install-agents: $pkg is at '${got:-nothing}', expected $version" >&2
    fail=1
  elif ! runs "$bin"; then
    echo "install-agents: $dir/node_modules/.bin/$bin does not run (is the native optional dependency missing?)" >&2
    fail=1
  else
    echo "$bin $version: $dir/node_modules/.bin/$bin ($("$dir/node_modules/.bin/$bin" --version 2>/dev/null | head -n1))"
  fi
done
exit $fail
