#!/bin/sh
# Joins orders with customers and products into one enriched CSV.
# Usage: transform.sh ORDERS CUSTOMERS PRODUCTS OUT_FILE
# EXPECTED_ROWS (from extract_orders' result) guards against a short read.
set -eu
. "$(dirname "$0")/lib.sh"

orders=$1 customers=$2 products=$3 out=$4

# lookup FILE KEY prints the CSV line whose first field is KEY.
lookup() {
	while IFS= read -r line; do
		case $line in "$2",*)
			echo "$line"
			return 0
			;;
		esac
	done <"$1"
	return 1
}

n=$(count_rows "$orders")
if [ "$n" != "${EXPECTED_ROWS:-$n}" ]; then
	fail ShortRead "read $n orders, extract reported $EXPECTED_ROWS"
fi

total=0
{
	echo "order_id,customer,country,product,quantity,amount_cents"
	tail -n +2 "$orders" | while IFS=, read -r order customer product qty; do
		c=$(lookup "$customers" "$customer") || c="$customer,?,?"
		p=$(lookup "$products" "$product") || p="$product,?,0"
		name=$(echo "$c" | cut -d, -f2)
		country=$(echo "$c" | cut -d, -f3)
		pname=$(echo "$p" | cut -d, -f2)
		price=$(echo "$p" | cut -d, -f3)
		echo "$order,$name,$country,$pname,$qty,$((qty * price))"
	done
} >"$out.tmp"
mv "$out.tmp" "$out"
for amount in $(tail -n +2 "$out" | cut -d, -f6); do
	total=$((total + amount))
done
rows=$(count_rows "$out")
echo "transform: $rows rows, $total cents, in $out" >&2
result "{\"rows\":$rows,\"file\":\"$out\",\"revenue_cents\":$total}"
