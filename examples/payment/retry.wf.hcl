# Retry settings shared by the activities that talk to the payment API.

# Both charge_card and ship draw their retries (not their first attempts)
# from this budget, so a payment API outage cannot turn into a retry storm:
# at most 10 retries a minute, and the 11th waits until the window frees.
retry_budget "payment_api" {
  max_retries  = 10
  window       = "1m"
  on_exhausted = "wait"
}

# Waits 500ms, 1s, 2s, 4s (then capped at 4s) before attempts 2..5, each
# jittered to a random point in [d/2, d] so that many orders failing at
# once do not retry in lockstep. A Retry-After header from the API replaces
# the computed wait.
retry_policy "payment" {
  backoff              = "exponential"
  initial_interval     = "500ms"
  backoff_coefficient  = 2
  maximum_interval     = "4s"
  maximum_attempts     = 5
  jitter               = "equal"
  non_retryable_errors = ["CardDeclined", "http:4*"]
  honor_retry_after    = true
  budget               = retry_budget.payment_api
}
