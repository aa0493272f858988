# Retry settings shared by the activities that talk to the payment API.

# Both charge_card and ship draw their retries (not their first attempts)
# from this budget, so a payment API outage cannot turn into a retry storm:
# at most 10 retries a minute, and the 11th waits until the window frees.
retry_budget "payment_api" {
  max_retries  = 10
  window       = "1m"
  on_exhausted = "wait"
}

# Shared by every activity that talks to the payment API (charge_card and
# ship, through the payment policy). When at least half of the last 30s of
# calls failed with a server error, a timeout or a refused connection (at
# least 3 calls), it opens: no attempt reaches the API for 10s, the
# attempts due meanwhile wait (durably: kill wf and the next apply waits
# for the same moment) and are not counted as failures or retries. Then
# one trial call goes through; its success closes the breaker, its failure
# opens it for another 10s. 4xx answers are the API working: they never
# open it.
circuit_breaker "payment_api" {
  failure_ratio   = 0.5
  minimum_calls   = 3
  window          = "30s"
  break_duration  = "10s"
  half_open_calls = 1
  failures        = ["http:5*", "http:connection", "timeout"]
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
  circuit_breaker      = circuit_breaker.payment_api
}
