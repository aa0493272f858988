#!/bin/sh
# "Deploys" to region $1: fails the first attempt for ap-south (a flaky
# region), and prints a JSON result with the version. It echoes a
# fingerprint of the token; wf removes the token itself from what it keeps.
set -eu
region=$1
if [ "$region" = ap-south ] && [ "$WF_ATTEMPT" = 1 ]; then
	echo "ap-south: timed out talking to the region" >&2
	exit 1
fi
echo "deploying to $region with token $DEPLOY_TOKEN" >&2
printf '{"region":"%s","version":"1.4.%s"}\n' "$region" "$WF_ATTEMPT"
