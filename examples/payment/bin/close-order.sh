#!/bin/sh
# Records the finished order. Usage: close-order.sh ORDER SUMMARY_JSON
set -eu
mkdir -p out/orders
printf '%s\n' "$2" >"out/orders/order-$1.json"
echo "close-order: order $1 closed, summary in out/orders/order-$1.json" >&2
