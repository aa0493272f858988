#!/bin/sh
# Copies rows $WF_HEARTBEAT_DETAILS+1 .. $ROWS (into out/rows.txt), writing
# the last row done to $WF_HEARTBEAT_FILE after each one. Environment:
# ROWS, ROW_SECONDS, HANG_AT (set by the workflow) and wf's WF_* variables.
set -eu
mkdir -p out
done_rows=${WF_HEARTBEAT_DETAILS:-0}
case $done_rows in
	'' | *[!0-9]*) done_rows=0 ;; # not a row number: start over
esac
echo "attempt $WF_ATTEMPT: resuming after row $done_rows of $ROWS" >&2
row=$done_rows
while [ "$row" -lt "$ROWS" ]; do
	row=$((row + 1))
	sleep "$ROW_SECONDS"
	# The copy is keyed by the row, so a row done twice is written once.
	grep -qx "row $row" out/rows.txt 2>/dev/null || echo "row $row" >>out/rows.txt
	# The heartbeat, and the progress the next attempt starts from.
	echo "$row" >"$WF_HEARTBEAT_FILE"
	if [ "$WF_ATTEMPT" = 1 ] && [ "$row" = "${HANG_AT:-0}" ]; then
		echo "attempt 1: stuck after row $row (no more heartbeats)" >&2
		sleep 3600
	fi
done
echo "{\"rows\": $row, \"resumed_after\": $done_rows, \"attempt\": $WF_ATTEMPT}"
