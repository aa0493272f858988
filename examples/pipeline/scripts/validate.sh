#!/bin/sh
# Checks the enriched data. Usage: validate.sh FILE
# Bad data fails with error type BadData, which the workflow lists in
# non_retryable_errors: running the check again cannot fix the data.
set -eu
. "$(dirname "$0")/lib.sh"

file=$1
line=1
tail -n +2 "$file" | {
	while IFS=, read -r order customer country product qty amount; do
		line=$((line + 1))
		case $qty in '' | *[!0-9]*)
			fail BadData "$file line $line: order $order has quantity $qty"
			;;
		esac
		if [ "$customer" = "?" ] || [ "$product" = "?" ]; then
			fail BadData "$file line $line: order $order has an unknown customer or product"
		fi
	done
}
echo "validate: $file is clean" >&2
result "{\"checked\":$(count_rows "$file")}"
