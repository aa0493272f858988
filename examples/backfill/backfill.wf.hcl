# A long-running job that heartbeats its progress and resumes from it.
#
# copy_rows copies 40 "rows", one at a time. After each row it writes the
# row number to $WF_HEARTBEAT_FILE: that is its heartbeat (wf kills it when
# none comes within heartbeat_timeout) and its progress details (the next
# attempt gets them in $WF_HEARTBEAT_DETAILS and starts after that row).

variable "rows" {
  type    = number
  default = 40
}

# Seconds per row.
variable "row_seconds" {
  type    = string
  default = "0.25"
}

# With e.g. 12, attempt 1 hangs after row 12 (it stops heartbeating): wf
# kills it after heartbeat_timeout and attempt 2 carries on from row 13.
variable "hang_at" {
  type    = number
  default = 0
}

workflow "backfill" {
  key = "orders-2025"

  activity "copy_rows" {
    exec {
      command = ["./bin/copy-rows.sh"]
      env = {
        ROWS        = "${var.rows}"
        ROW_SECONDS = var.row_seconds
        HANG_AT     = "${var.hang_at}"
      }
    }
    # A row takes a fraction of a second: 3 s without a heartbeat means
    # the job is stuck, not slow.
    heartbeat_timeout = "3s"
    timeout           = "10m"
    retry {
      backoff              = "fixed"
      initial_interval     = "1s"
      maximum_attempts     = 4
      non_retryable_errors = ["BadRow"]
    }
  }

  activity "report" {
    exec {
      command = ["./bin/report.sh", jsonencode(activity.copy_rows.result)]
    }
  }
}
