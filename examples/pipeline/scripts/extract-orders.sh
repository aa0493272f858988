#!/bin/sh
# Extracts the batch's orders. Usage: extract-orders.sh OUT_DIR ROWS
# With BAD_ROW=1 it appends an order with a negative quantity, which the
# validate step rejects.
set -eu
. "$(dirname "$0")/lib.sh"

dir=$1 rows=$2
mkdir -p "$dir"
file="$dir/orders.csv"
{
	echo "order_id,customer_id,product_id,quantity"
	i=1
	while [ "$i" -le "$rows" ]; do
		echo "o$i,c$((i % 4 + 1)),p$((i % 3 + 1)),$((i % 5 + 1))"
		i=$((i + 1))
	done
	if [ "${BAD_ROW:-0}" = 1 ]; then
		echo "o$i,c1,p1,-3"
	fi
} >"$file.tmp"
mv "$file.tmp" "$file"
n=$(count_rows "$file")
echo "extract-orders: $n orders in $file" >&2
result "{\"rows\":$n,\"file\":\"$file\"}"
