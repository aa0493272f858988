#!/bin/sh
# Reserves stock for an order. Usage: reserve-stock.sh ORDER SKU QUANTITY
#
# The reservation is stored under the activity's idempotency key, so a retry
# or a resumed run finds the reservation it already made instead of
# reserving twice.
set -eu

order=$1 sku=$2 qty=$3
key=${WF_IDEMPOTENCY_KEY:-manual-$order}
dir=out/reservations
mkdir -p "$dir"

case $qty in
'' | *[!0-9]*)
	if [ -n "${WF_ERROR_FILE:-}" ]; then
		printf '{"type":"BadQuantity","message":"quantity %s is not a number","non_retryable":true}\n' "$qty" >"$WF_ERROR_FILE"
	fi
	echo "reserve-stock: quantity $qty is not a number" >&2
	exit 1
	;;
esac

file="$dir/$key.json"
if [ -f "$file" ]; then
	echo "reserve-stock: order $order already reserved under $key" >&2
else
	printf '{"reservation":"rsv-%s-%s","order":"%s","sku":"%s","quantity":%s}\n' \
		"$order" "$(date +%s)" "$order" "$sku" "$qty" >"$file.tmp"
	mv "$file.tmp" "$file"
	echo "reserve-stock: reserved $qty x $sku for order $order" >&2
fi
if [ -n "${WF_OUTPUT_FILE:-}" ]; then
	cat "$file" >"$WF_OUTPUT_FILE"
else
	cat "$file"
fi
