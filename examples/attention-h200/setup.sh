#!/usr/bin/env bash
# Assembles the attention-h200 workspace: copies harness/cuda into
# workspace/harness/cuda (where campaign.toml's protected globs cover it),
# makes workspace a git repository and commits the initial kernel.
#
#   examples/attention-h200/setup.sh          # in place, then:
#   gadfly campaign create examples/attention-h200/campaign.toml
#
#   examples/attention-h200/setup.sh DEST     # a copy in DEST (this repository untouched), then:
#   gadfly campaign create DEST/campaign.toml
#
# Run again after harness/cuda changes: it refreshes the copy and commits it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dest=${1:-$here}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ "$dest" != "$here" ]; then
  cp "$here/campaign.toml" "$here/campaign-initial.toml" "$dest/"
  if [ ! -d "$dest/workspace/.git" ]; then
    rm -rf "$dest/workspace"
    mkdir -p "$dest/workspace"
    cp -r "$here/workspace/kernel" "$here/workspace/README.md" "$here/workspace/.gitignore" "$dest/workspace/"
  fi
fi
ws="$dest/workspace"
rm -rf "$ws/harness/cuda"
mkdir -p "$ws/harness"
tar -C "$repo/harness" --exclude='cuda/results' --exclude='__pycache__' --exclude='*.pyc' -cf - cuda \
  | tar -C "$ws/harness" -xf -
if ! cmp -s "$ws/harness/cuda/problems/attention/baseline.cu" "$ws/kernel/attention.cu"; then
  echo "setup.sh: note: kernel/attention.cu differs from the protected initial kernel" \
       "(harness/cuda/problems/attention/baseline.cu); the baseline is the protected copy" >&2
fi
cd "$ws"
git_c() { git -c user.name="gadfly setup" -c user.email="setup@gadfly.invalid" "$@"; }
if [ ! -d .git ]; then
  git init -q
  git add -A
  git_c commit -qm "initial kernel and harness"
else
  git add -A harness .gitignore README.md
  git diff --cached --quiet || git_c commit -qm "refresh harness/cuda"
fi
echo "workspace ready: $ws ($(git rev-parse --short HEAD))"
echo "next: gadfly campaign create $dest/campaign.toml"
