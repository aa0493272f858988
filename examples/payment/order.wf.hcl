locals {
  # The payment API is a local stand-in started by activity.start_api.
  api_addr = "127.0.0.1:${var.api_port}"
}

workflow "order" {
  # One instance per order: `wf plan -var order_id=1002` plans a new one.
  key = "order-${var.order_id}"

  # Builds the flaky API (a standalone Go program in ./flakyapi) and starts
  # it in the background; its result is {"url": ..., "pid": ...}.
  activity "start_api" {
    exec {
      command = ["./bin/start-api.sh"]
      env = {
        API_PORT     = "${var.api_port}"
        API_THROTTLE = "${var.api_throttle}"
        API_FAIL     = "${var.api_fail}"
        API_OUTAGE   = var.api_outage
        API_IDLE     = "60s"
      }
    }
    timeout = "2m" # the first `go build` on a cold cache takes a while
  }

  # A local script; it keys the reservation by $WF_IDEMPOTENCY_KEY so a
  # retried or resumed attempt never reserves twice.
  activity "reserve_stock" {
    exec {
      command = ["./bin/reserve-stock.sh", var.order_id, var.sku, "${var.quantity}"]
    }
    timeout = "10s"
    retry {
      backoff          = "fixed"
      initial_interval = "200ms"
      maximum_attempts = 3
      # A bad quantity is a bug in the order, not a hiccup.
      non_retryable_errors = ["BadQuantity"]
    }
  }

  # Referencing activity.start_api.result.url makes start_api an upstream
  # of this activity; depends_on adds reserve_stock without using its data.
  # wf sends the activity's idempotency key as the Idempotency-Key header,
  # so a retry after a lost answer cannot charge the card twice.
  activity "charge_card" {
    http {
      url     = "${activity.start_api.result.url}/charges"
      method  = "POST"
      headers = { "Content-Type" = "application/json" }
      body = jsonencode({
        order        = var.order_id
        amount_cents = var.amount_cents
        card         = var.card
      })
      expect_status = [201]
    }
    timeout    = "5s"
    depends_on = [activity.reserve_stock]

    # Ordered retry rules: the first block whose `on` matches decides.
    # Rate limiting (429) is waited out on its own schedule and does not
    # use up the 5 attempts of the payment policy.
    retry {
      on               = ["http:429"]
      backoff          = "fixed"
      initial_interval = "1s"
      maximum_attempts = 10
      budget           = retry_budget.payment_api
    }
    # Everything else: the payment policy. A 402 (declined card) matches
    # its "http:4*" and fails the activity at once.
    retry {
      policy = retry_policy.payment
    }
  }

  # Uses the charge id from charge_card's JSON answer.
  activity "ship" {
    http {
      url     = "${activity.start_api.result.url}/shipments"
      method  = "POST"
      headers = { "Content-Type" = "application/json" }
      body = jsonencode({
        order  = var.order_id
        charge = activity.charge_card.result.id
      })
    }
    timeout = "5s"
    retry {
      policy = retry_policy.payment
      # Keep retrying server errors under the policy, but once the API has
      # been unreachable for 10s it is gone: stop early.
      retry_if = error.type != "http:connection" || elapsed < 10
    }
  }

  # The mailer fails its first attempt with exit status 75 (EX_TEMPFAIL).
  # Only that status is worth retrying; any other exit status is a bug.
  activity "send_receipt" {
    exec {
      command = [
        "./bin/send-receipt.sh",
        var.order_id,
        activity.charge_card.result.id,
        activity.ship.result.id,
      ]
    }
    timeout = "10s"
    retry {
      backoff          = "fixed"
      initial_interval = "500ms"
      maximum_attempts = 4
      retryable_errors = ["exit:75"]
    }
  }

  # A durable timer: kill wf during the wait and the next apply waits only
  # for what is left.
  activity "cool_down" {
    sleep {
      duration = "3s"
    }
    depends_on = [activity.ship]
  }

  activity "close_order" {
    exec {
      command = [
        "./bin/close-order.sh",
        var.order_id,
        jsonencode({
          order       = var.order_id
          reservation = activity.reserve_stock.result.reservation
          charge      = activity.charge_card.result.id
          shipment    = activity.ship.result.id
          receipt     = activity.send_receipt.result.receipt
        }),
      ]
    }
    depends_on = [activity.cool_down]
  }
}
