#!/bin/sh
# Prints what copy_rows reported and how many rows are in out/rows.txt.
set -eu
echo "copy_rows: $1"
echo "rows copied: $(wc -l <out/rows.txt)"
