#!/bin/sh
# "Deploys" a release to an environment: points the environment's slot at
# the release and records when the new instance started. The fake service
# becomes healthy WARMUP seconds after that. Usage: deploy.sh ENV RELEASE
#
# The start time is a file rather than a background process, so nothing is
# left running and a crash of wf at any point loses nothing.
set -eu

env=$1 release=$2
slot="out/$env"
mkdir -p "$slot"
rm -f "$slot/healthy"
printf '%s\n' "$release" >"$slot/candidate"
printf '%s\n' "${WARMUP:-2}" >"$slot/warmup"
date +%s >"$slot/started_at"
echo "deploy: $release deployed to $env, warming up for ${WARMUP:-2}s" >&2
