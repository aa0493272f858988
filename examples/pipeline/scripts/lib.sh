# Helpers shared by the pipeline scripts (sourced, not run).

# result writes this activity's JSON result where wf reads it, or to stdout
# when a script is run by hand.
result() {
	if [ -n "${WF_OUTPUT_FILE:-}" ]; then
		printf '%s\n' "$1" >"$WF_OUTPUT_FILE"
	else
		printf '%s\n' "$1"
	fi
}

# fail TYPE MESSAGE [EXTRA_JSON_FIELDS] writes a typed error to
# $WF_ERROR_FILE and exits 1. wf retries or not depending on TYPE.
fail() {
	if [ -n "${WF_ERROR_FILE:-}" ]; then
		printf '{"type":"%s","message":"%s"%s}\n' "$1" "$2" "${3:-}" >"$WF_ERROR_FILE"
	fi
	echo "$(basename "$0"): $1: $2" >&2
	exit 1
}

# count_rows FILE prints the number of data rows of a CSV with a header.
count_rows() {
	echo $(($(wc -l <"$1") - 1))
}
