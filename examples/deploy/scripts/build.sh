#!/bin/sh
# "Builds" the application: writes a release directory with a version file
# and a checksum. Usage: build.sh VERSION
set -eu

version=$1
dir="out/releases/$version"
mkdir -p "$dir"
printf 'app %s built %s\n' "$version" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dir/app.txt"
sum=$(cksum <"$dir/app.txt" | cut -d' ' -f1)
echo "build: release $version in $dir (cksum $sum)" >&2
json="{\"version\":\"$version\",\"release\":\"$dir\",\"cksum\":\"$sum\"}"
if [ -n "${WF_OUTPUT_FILE:-}" ]; then
	printf '%s\n' "$json" >"$WF_OUTPUT_FILE"
else
	printf '%s\n' "$json"
fi
