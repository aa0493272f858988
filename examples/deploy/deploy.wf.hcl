# Build, deploy, wait until healthy, let it bake, promote.

variable "version" {
  type    = string
  default = "1.4.2"
}

variable "environment" {
  type    = string
  default = "staging"
}

# Seconds the fake service needs before its health check passes. Try 60 to
# watch the health check give up when its 15s expiration runs out.
variable "warmup_seconds" {
  type    = number
  default = 2
}

workflow "deploy" {
  # One instance per environment and version.
  key = "${var.environment}-${var.version}"

  activity "build" {
    exec {
      command = ["./scripts/build.sh", var.version]
    }
    timeout = "1m"
  }

  activity "deploy" {
    exec {
      command = ["./scripts/deploy.sh", var.environment, activity.build.result.release]
      env     = { WARMUP = "${var.warmup_seconds}" }
    }
    timeout = "1m"
    retry {
      maximum_attempts = 2
    }
  }

  # Polling as a retry policy: check every 250ms, at most 20 times, and give
  # up when 15s have passed since the first check, whichever comes first.
  # Each failing probe itself takes about 1s, so with a slow service the
  # 15s expiration is what ends it.
  activity "health_check" {
    exec {
      command = ["./scripts/health-check.sh", var.environment]
    }
    timeout    = "5s"
    depends_on = [activity.deploy]
    retry {
      backoff          = "fixed"
      initial_interval = "250ms"
      maximum_attempts = 20
      expiration       = "15s"
      # Only "still warming up" is worth waiting for.
      retryable_errors = ["NotReady"]
    }
  }

  # Bake time: a durable 1s timer between a healthy check and promotion.
  activity "bake" {
    sleep {
      duration = "1s"
    }
    depends_on = [activity.health_check]
  }

  activity "promote" {
    exec {
      command = ["./scripts/promote.sh", var.environment, activity.build.result.release]
    }
    depends_on = [activity.bake]
  }
}
