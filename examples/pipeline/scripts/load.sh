#!/bin/sh
# "Loads" the enriched data into a revenue report, one line per customer.
# Usage: load.sh ENRICHED REPORT BATCH
set -eu
. "$(dirname "$0")/lib.sh"

file=$1 report=$2 batch=$3
{
	echo "Revenue report for batch $batch"
	echo
	echo "customer    revenue_cents"
	for name in $(tail -n +2 "$file" | cut -d, -f2 | sort -u); do
		sum=0
		while IFS=, read -r _ customer _ _ _ amount; do
			if [ "$customer" = "$name" ]; then
				sum=$((sum + amount))
			fi
		done <"$file"
		printf '%-11s %13s\n' "$name" "$sum"
	done
} >"$report.tmp"
mv "$report.tmp" "$report"
echo "load: report written to $report" >&2
cat "$report" >&2
result "{\"report\":\"$report\"}"
