#!/bin/sh
# Extracts the product catalogue. Usage: extract-products.sh OUT_DIR
set -eu
. "$(dirname "$0")/lib.sh"

dir=$1
mkdir -p "$dir"
file="$dir/products.csv"
cat >"$file.tmp" <<'CSV'
product_id,name,price_cents
p1,mug,1200
p2,t-shirt,2500
p3,sticker,300
CSV
mv "$file.tmp" "$file"
n=$(count_rows "$file")
echo "extract-products: $n products in $file" >&2
result "{\"rows\":$n,\"file\":\"$file\"}"
