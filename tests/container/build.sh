#!/usr/bin/env bash
# Builds localhost/gadfly:ci, the CI variant of docker/Dockerfile
# (docker/Containerfile.ci), with podman, from a debootstrap of Debian
# bookworm (no image registry is reachable in CI; Debian's packages are),
# and localhost/gadfly-ci-postgres:15 for the compose test.
# Idempotent and cached: the base image is made once (skipped when
# localhost/debian-base:bookworm exists), podman's layer cache keeps the
# runtime packages, and only the binary's layer changes between runs.
#
#   tests/container/build.sh [GADFLY_BINARY]
#
# GADFLY_BINARY defaults to target/debug/gadfly, the binary `cargo test`
# builds and tests (built with `cargo build --locked` when absent): no
# release build in CI, which would add minutes on two cores. It is
# stripped into the build context (225 MB with debug info, about a fifth
# of that without).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t0=$(date +%s)

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v podman-compose >/dev/null || need+=(podman-compose)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}"
fi
export CONTAINERS_CONF="$root/tests/container/containers.conf"

# The two files agree past their base: the same instructions, in the same
# order, but for where the binary comes from (comments aside).
after_from() { sed -n "\\|^FROM $1|,\$p" "$2" | sed 1d | grep -v '^#'; }
if ! diff <(after_from 'debian:bookworm-slim' docker/Dockerfile |
  sed 's|^COPY --from=build /src/target/release/gadfly |COPY gadfly |') \
  <(after_from 'localhost/debian-base:bookworm' docker/Containerfile.ci); then
  echo "docker/Containerfile.ci and docker/Dockerfile's runtime stage differ past their base (above)" >&2
  exit 1
fi

base=localhost/debian-base:bookworm
if podman image exists "$base"; then
  echo "build.sh: $base is there (no debootstrap)"
else
  rootfs=$(mktemp -d /var/tmp/gadfly-ci-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
  tar -C "$rootfs" -c . | podman import -q - "$base" >/dev/null
  rm -rf "$rootfs"
  echo "build.sh: $base imported from debootstrap in $(($(date +%s) - t0)) s"
fi

bin=${1:-target/debug/gadfly}
if [ ! -x "$bin" ]; then
  cargo build --locked --bin gadfly
fi
ctx="$root/target/container-ci/context"
mkdir -p "$ctx/docker"
cp docker/runtime-setup.sh "$ctx/docker/runtime-setup.sh"
if command -v strip >/dev/null; then
  strip -o "$ctx/gadfly.new" "$bin"
else
  cp "$bin" "$ctx/gadfly.new"
fi
mv "$ctx/gadfly.new" "$ctx/gadfly"
# --network host: runtime-setup.sh installs from Debian's mirror; docker
# format keeps the HEALTHCHECK (the OCI format has none).
# build TAG FILE CONTEXT; the previous build's image, untagged now, goes
# (unless a container uses it).
build() {
  local old new
  old=$(podman image inspect -f '{{.Id}}' "$1" 2>/dev/null || true)
  podman build -q --format docker --network host -t "$1" -f "$2" "$3" >/dev/null 2>"$ctx/build.log" ||
    { cat "$ctx/build.log" >&2; echo "build.sh: building $1 failed" >&2; exit 1; }
  new=$(podman image inspect -f '{{.Id}}' "$1")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then podman rmi "$old" >/dev/null 2>&1 || true; fi
}
build localhost/gadfly:ci docker/Containerfile.ci "$ctx"
echo "build.sh: localhost/gadfly:ci built from $bin in $(($(date +%s) - t0)) s"

# For the compose test (docker/compose.yaml with tests/container/compose.ci.yaml):
# a stand-in for postgres:15 from Debian's PostgreSQL 15 (cached likewise).
build localhost/gadfly-ci-postgres:15 tests/container/postgres/Containerfile tests/container/postgres
echo "build.sh: localhost/gadfly-ci-postgres:15 ready after $(($(date +%s) - t0)) s"
