# Inputs of the payment example. Override any of them with
# -var NAME=VALUE, a -var-file, a *.auto.wfvars file or WF_VAR_NAME.

# The order to process; it is also the workflow instance key.
variable "order_id" {
  type    = string
  default = "1001"
}

# The card to charge. 4000000000000002 is always declined (HTTP 402).
variable "card" {
  type    = string
  default = "4242424242424242"
}

variable "amount_cents" {
  type    = number
  default = 4200
}

variable "sku" {
  type    = string
  default = "WF-MUG-01"
}

variable "quantity" {
  type    = number
  default = 1
}

# Port of the flaky payment API on 127.0.0.1.
variable "api_port" {
  type    = number
  default = 8089
}

# The API answers 429 to this many charge requests of each order first...
variable "api_throttle" {
  type    = number
  default = 1
}

# ...and then 503 to this many.
variable "api_fail" {
  type    = number
  default = 1
}

# With e.g. "8s" the API is down hard for that long from the first charge
# request on (every charge answers 503): watch the payment_api breaker
# open, wait and close in the TUI.
variable "api_outage" {
  type    = string
  default = "0s"
}
