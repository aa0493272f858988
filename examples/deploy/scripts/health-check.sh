#!/bin/sh
# Health check of the fake service in environment ENV.
# Usage: health-check.sh ENV
#
# While the service warms up the probe hangs for a second (like a real one
# waiting for an answer) and fails with error type NotReady, which the
# workflow retries; if nothing was deployed it fails with NotDeployed,
# which the workflow does not retry.
set -eu

env=$1
slot="out/$env"

fail() {
	if [ -n "${WF_ERROR_FILE:-}" ]; then
		printf '{"type":"%s","message":"%s"}\n' "$1" "$2" >"$WF_ERROR_FILE"
	fi
	echo "health-check: $1: $2" >&2
	exit 1
}

[ -f "$slot/started_at" ] || fail NotDeployed "nothing deployed to $env"
started=$(cat "$slot/started_at")
warmup=$(cat "$slot/warmup")
up=$(($(date +%s) - started))
if [ "$up" -lt "$warmup" ]; then
	sleep 1
	fail NotReady "up ${up}s, warming up for ${warmup}s (attempt ${WF_ATTEMPT:-1})"
fi
: >"$slot/healthy"
echo "health-check: $env healthy after ${up}s (attempt ${WF_ATTEMPT:-1})" >&2
