# A fan-out: one deploy per region, the regions listed by an upstream
# activity, a canary step skipped unless asked for, and a report of every
# element's result. See README.md.

variable "regions" {
  type        = list(string)
  description = "The regions to deploy to, from regions.auto.wfvars.json."
}

# A token the deploy script needs. Sensitive: shown as (sensitive), and
# removed from what the activities print before it is stored.
variable "deploy_token" {
  type      = string
  default   = "dev-token-1234"
  sensitive = true
}

variable "canary" {
  type    = bool
  default = false
}

workflow "rollout" {
  # Prints the regions as JSON (its result): the for_each below is known
  # only once it has run.
  activity "list_regions" {
    exec {
      command = ["./bin/list-regions.sh", jsonencode(var.regions)]
    }
  }

  # One activity per region: activity.deploy["eu-west"], ... Each has its
  # own attempts, retry timers and idempotency key.
  activity "deploy" {
    for_each = toset(activity.list_regions.result)
    exec {
      command = ["./bin/deploy.sh", each.key]
      env     = { DEPLOY_TOKEN = var.deploy_token }
    }
    retry {
      maximum_attempts = 3
      initial_interval = "200ms"
    }
  }

  # Runs only when asked for (-var canary=true); otherwise skipped, and a
  # skipped activity never fails the run.
  activity "canary_check" {
    when = var.canary
    exec {
      command = ["./bin/deploy.sh", "canary"]
      env     = { DEPLOY_TOKEN = var.deploy_token }
    }
    depends_on = [activity.deploy]
  }

  # activity.deploy is a map of the elements' outputs, by key.
  activity "report" {
    exec {
      command = concat(["echo"], [for region, d in activity.deploy : "${region}:${d.result.version}"])
    }
  }

  output "versions" {
    value = { for region, d in activity.deploy : region => d.result.version }
  }
}
