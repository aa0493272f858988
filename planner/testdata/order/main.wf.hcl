variable "order_id" {
  type    = string
  default = "1001"
}

locals {
  api = "http://127.0.0.1:8080"
}

retry_policy "payment" {
  backoff             = "exponential"
  initial_interval    = "1s"
  backoff_coefficient = 2.0
  maximum_interval    = "8s"
  maximum_attempts    = 5
  jitter              = "full"
}

workflow "order" {
  key = "order-${var.order_id}"

  activity "charge_card" {
    exec {
      command = ["./bin/charge", var.order_id]
    }
    retry = retry_policy.payment
  }

  activity "ship" {
    http {
      url    = "${local.api}/ship"
      method = "POST"
      body   = jsonencode({ order = var.order_id, charge = activity.charge_card.result.id })
    }
    retry {
      on               = ["http:429"]
      initial_interval = "5s"
      maximum_attempts = 20
    }
    retry {
      policy           = retry_policy.payment
      maximum_attempts = 3
    }
  }

  activity "cool_down" {
    sleep { duration = "10m" }
    depends_on = [activity.ship]
  }
}
