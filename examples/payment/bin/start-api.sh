#!/bin/sh
# Builds and starts the flaky payment API in the background, unless one
# already answers on the port, waits until it answers /healthz and reports
# its URL and pid as this activity's result.
#
# Environment (set by the workflow): API_PORT, API_FAIL, API_THROTTLE,
# API_OUTAGE, API_IDLE. The API exits by itself after API_IDLE without requests.
set -eu

port=${API_PORT:-8089}
addr="127.0.0.1:$port"
mkdir -p out

# Building a file (not a package path) works inside this module and also
# in a copy of the example that has no go.mod.
go build -o out/flakyapi ./flakyapi/main.go

# result prints this activity's JSON result where wf reads it (stdout when
# the script is run by hand).
result() {
	if [ -n "${WF_OUTPUT_FILE:-}" ]; then
		printf '%s\n' "$1" >"$WF_OUTPUT_FILE"
	else
		printf '%s\n' "$1"
	fi
}

fail_start() {
	if [ -n "${WF_ERROR_FILE:-}" ]; then
		printf '{"type":"ApiDidNotStart","message":"%s","non_retryable":true}\n' "$1" >"$WF_ERROR_FILE"
	fi
	echo "start-api: $1" >&2
	exit 1
}

flags="-fail ${API_FAIL:-0} -throttle ${API_THROTTLE:-0} -outage ${API_OUTAGE:-0s} -idle ${API_IDLE:-60s}"
if out/flakyapi -addr "$addr" -healthcheck 2>/dev/null; then
	pid=$(cat out/api.pid 2>/dev/null || echo 0)
	if [ "$(cat out/api.flags 2>/dev/null || true)" = "$flags" ]; then
		echo "start-api: reusing the API already answering on $addr (pid $pid)" >&2
		result "{\"url\":\"http://$addr\",\"pid\":$pid,\"reused\":true}"
		exit 0
	fi
	# Started with other flags (or not by us): replace it if it is ours.
	if [ "$pid" -gt 0 ] && kill "$pid" 2>/dev/null; then
		echo "start-api: restarting the API (pid $pid) with $flags" >&2
		i=0
		while out/flakyapi -addr "$addr" -healthcheck 2>/dev/null && [ "$i" -lt 50 ]; do
			i=$((i + 1))
			sleep 0.1
		done
	fi
fi

# setsid (where present) puts the server in its own session, so that it
# outlives this activity's process group; the redirections make sure it
# holds none of the activity's pipes open.
if command -v setsid >/dev/null 2>&1; then
	# $flags is split into words on purpose.
	# shellcheck disable=SC2086
	setsid out/flakyapi -addr "$addr" $flags </dev/null >>out/api.log 2>&1 &
else
	# shellcheck disable=SC2086
	nohup out/flakyapi -addr "$addr" $flags </dev/null >>out/api.log 2>&1 &
fi
pid=$!
echo "$pid" >out/api.pid
echo "$flags" >out/api.flags

i=0
until out/flakyapi -addr "$addr" -healthcheck 2>/dev/null; do
	i=$((i + 1))
	if ! kill -0 "$pid" 2>/dev/null; then
		fail_start "the API exited at once (port $port in use?), see out/api.log"
	fi
	if [ "$i" -ge 100 ]; then
		kill "$pid" 2>/dev/null || true
		fail_start "the API did not answer /healthz within 10s, see out/api.log"
	fi
	sleep 0.1
done
echo "start-api: API pid $pid listening on $addr (log: out/api.log)" >&2
result "{\"url\":\"http://$addr\",\"pid\":$pid,\"reused\":false}"
