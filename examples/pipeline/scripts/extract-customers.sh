#!/bin/sh
# Extracts customers from a "CRM" that is unavailable for the first
# FAILURES attempts (default 2). Usage: extract-customers.sh OUT_DIR
#
# A failed attempt writes a typed error with retry_after to $WF_ERROR_FILE:
# wf waits that long instead of its computed backoff.
set -eu
. "$(dirname "$0")/lib.sh"

dir=$1
attempt=${WF_ATTEMPT:-1}
if [ "$attempt" -le "${FAILURES:-2}" ]; then
	fail SourceUnavailable "CRM is down for maintenance (attempt $attempt)" ',"retry_after":"300ms"'
fi

mkdir -p "$dir"
file="$dir/customers.csv"
cat >"$file.tmp" <<'CSV'
customer_id,name,country
c1,Ada,GB
c2,Grace,US
c3,Edsger,NL
c4,Barbara,US
CSV
mv "$file.tmp" "$file"
n=$(count_rows "$file")
echo "extract-customers: $n customers in $file (attempt $attempt)" >&2
result "{\"rows\":$n,\"file\":\"$file\"}"
