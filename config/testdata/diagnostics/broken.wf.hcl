retry_policy "payment" {
  maximum_attempts = 3
	backoff = "quadratic"
  initial_interval   = "1x"
}

retry_policy "forever" {
  jitter = "full"
}

workflow "order" {
  activity "charge" {
    exec {
      command = ["./charge", var.order_id, "héllo", local.nope]
    }
  }
}
