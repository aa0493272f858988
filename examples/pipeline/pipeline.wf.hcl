# A small ETL pipeline: three extracts run in parallel, a transform joins
# them (fan-in), then the result is validated and loaded into a report.

# The batch to process; it is also the workflow instance key.
variable "batch" {
  type    = string
  default = "2024-06-01"
}

# How many orders extract_orders generates.
variable "orders" {
  type    = number
  default = 12
}

# How many attempts of extract_customers fail with SourceUnavailable.
variable "source_failures" {
  type    = number
  default = 2
}

# true appends an order with a negative quantity: validate rejects it with
# the non-retryable error type BadData.
variable "inject_bad_row" {
  type    = bool
  default = false
}

locals {
  work = "out/${var.batch}"
}

# Waits 200ms, 400ms, 600ms... (initial_interval x n) between attempts; a
# retry_after written by the script replaces the computed wait.
retry_policy "extract" {
  backoff           = "linear"
  initial_interval  = "200ms"
  maximum_interval  = "1s"
  maximum_attempts  = 4
  expiration        = "30s"
  honor_retry_after = true
}

workflow "etl" {
  key = "batch-${var.batch}"

  activity "extract_orders" {
    exec {
      command = ["./scripts/extract-orders.sh", local.work, "${var.orders}"]
      env     = { BAD_ROW = var.inject_bad_row ? "1" : "0" }
    }
    timeout = "10s"
    retry   = retry_policy.extract
  }

  # Fails its first attempts with
  # {"type":"SourceUnavailable",...,"retry_after":"300ms"} in $WF_ERROR_FILE.
  activity "extract_customers" {
    exec {
      command = ["./scripts/extract-customers.sh", local.work]
      env     = { FAILURES = "${var.source_failures}" }
    }
    timeout = "10s"
    retry   = retry_policy.extract
  }

  activity "extract_products" {
    exec {
      command = ["./scripts/extract-products.sh", local.work]
    }
    timeout = "10s"
    retry   = retry_policy.extract
  }

  # No depends_on: the references to the three extracts' results are the
  # edges of the graph, so transform waits for all three.
  activity "transform" {
    exec {
      command = [
        "./scripts/transform.sh",
        activity.extract_orders.result.file,
        activity.extract_customers.result.file,
        activity.extract_products.result.file,
        "${local.work}/enriched.csv",
      ]
      env = { EXPECTED_ROWS = "${activity.extract_orders.result.rows}" }
    }
    timeout = "30s"
  }

  activity "validate" {
    exec {
      command = ["./scripts/validate.sh", activity.transform.result.file]
    }
    timeout = "10s"
    retry {
      backoff          = "fixed"
      initial_interval = "500ms"
      maximum_attempts = 3
      # Checking bad data again cannot make it good.
      non_retryable_errors = ["BadData"]
    }
  }

  activity "load" {
    exec {
      command = [
        "./scripts/load.sh",
        activity.transform.result.file,
        "${local.work}/report.txt",
        var.batch,
      ]
    }
    timeout    = "30s"
    depends_on = [activity.validate]
    retry {
      policy           = retry_policy.extract
      maximum_attempts = 2
    }
  }
}
