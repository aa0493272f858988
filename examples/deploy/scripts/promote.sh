#!/bin/sh
# Promotes the candidate release of ENV to current. Usage: promote.sh ENV RELEASE
set -eu

env=$1 release=$2
slot="out/$env"
[ -f "$slot/healthy" ] || {
	echo "promote: $env is not healthy" >&2
	exit 1
}
printf '%s\n' "$release" >"$slot/current.tmp"
mv "$slot/current.tmp" "$slot/current"
echo "promote: $env now serves $release" >&2
