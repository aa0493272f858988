#!/bin/sh
# Mails a receipt (to a file). Usage: send-receipt.sh ORDER CHARGE SHIPMENT
#
# The "mailer" is flaky: attempt 1 exits 75 (EX_TEMPFAIL), which the
# workflow retries; later attempts succeed.
set -eu

order=$1 charge=$2 shipment=$3
attempt=${WF_ATTEMPT:-1}

if [ "$attempt" -eq 1 ]; then
	echo "send-receipt: mail server busy (attempt $attempt), try again later" >&2
	exit 75
fi

mkdir -p out/receipts
file="out/receipts/order-$order.txt"
{
	echo "Receipt for order $order"
	echo "charge:   $charge"
	echo "shipment: $shipment"
	echo "sent on attempt $attempt"
} >"$file"
echo "send-receipt: receipt for order $order written to $file" >&2
# Without $WF_OUTPUT_FILE, wf parses stdout as the result when it is JSON.
printf '{"receipt":"%s","attempt":%s}\n' "$file" "$attempt"
