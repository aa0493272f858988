variable "order_id" {
  type    = string
  default = "1001"
}

locals {
  api = "http://127.0.0.1:8080"
}

retry_budget "payment_api" {
  max_retries  = 10        # retries (not first attempts) allowed per window
  window       = "1m"      # sliding window
  on_exhausted = "wait"    # "wait" (delay the retry until the budget frees) | "fail"
}

retry_policy "payment" {
  backoff              = "exponential"  # "exponential" | "linear" | "fixed"
  initial_interval     = "1s"
  backoff_coefficient  = 2.0            # exponential only, >= 1
  maximum_interval     = "8s"           # cap on one wait; default 100 x initial_interval
  maximum_attempts     = 5              # counts the first attempt; 0 = unlimited (default)
  expiration           = "2m"           # total time from first attempt start; default unlimited
  jitter               = "full"         # "none" (default) | "full" | "equal" | "decorrelated" | a number in (0,1]
  non_retryable_errors = ["CardDeclined", "http:4*"]
  retryable_errors     = []             # if non-empty, ONLY matching errors are retried
  retry_if             = error.type != "Fraud" && attempt < 10   # optional HCL expression
  honor_retry_after    = true           # default true
  budget               = retry_budget.payment_api
}

workflow "order" {
  key = "order-${var.order_id}"   # instance key; default "default"

  activity "charge_card" {
    exec {
      command = ["./bin/charge", var.order_id]  # argv, no shell; or:
      # script = "echo hi && ./bin/charge"       # run by /bin/sh -c
      env     = { API = local.api }
      dir     = "."                             # relative to the config dir
    }
    timeout = "30s"                 # per attempt (start-to-close)
    retry   = retry_policy.payment  # or an inline `retry { ... }` block
  }

  activity "ship" {
    http {
      url           = "${local.api}/ship"
      method        = "POST"
      headers       = { "Content-Type" = "application/json" }
      body          = jsonencode({ order = var.order_id, charge = activity.charge_card.result.id })
      expect_status = [200, 201]    # default: any 2xx
    }
    retry {
      maximum_attempts = 3
    }
  }

  activity "capture" {
    http { url = "${local.api}/capture" }
    # Ordered retry rules: the first block whose `on` matches the error decides.
    retry {
      on               = ["http:429"]
      initial_interval = "5s"
      maximum_attempts = 20
    }
    retry {
      policy           = retry_policy.payment   # start from a named policy...
      maximum_attempts = 3                      # ...and override some of it
    }
  }

  activity "cool_down" {
    sleep { duration = "10m" }      # a durable timer as an activity
    depends_on = [activity.ship]
  }
}
