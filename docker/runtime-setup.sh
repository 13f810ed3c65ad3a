#!/bin/sh
# What the gadfly image needs past its base, shared by docker/Dockerfile
# (FROM debian:bookworm-slim) and docker/Containerfile.ci (FROM a local
# debootstrap of bookworm): what evaluations need (git for snapshots, a C
# toolchain and make for CPU harnesses, python3, bubblewrap for the
# candidate's sandbox), curl for the health check, and the non-root user the
# daemon runs as (uid 10001).
set -eu
apt-get update
apt-get install -y --no-install-recommends ca-certificates git gcc libc6-dev make curl python3 bubblewrap
rm -rf /var/lib/apt/lists/*
useradd --create-home --uid 10001 gadfly
# The data dir exists in the image, the daemon's own and 0700, so that a
# fresh named volume mounted there takes that owner and mode: Docker copies
# them from the image, and without the folder Docker's volume is root's and
# the daemon cannot write it (podman gives a new volume to the container's
# user either way).
install -d -m 0700 -o gadfly -g gadfly /home/gadfly/data
