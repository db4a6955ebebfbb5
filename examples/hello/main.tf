# The demo configuration: plans and applies with the offline engine and no
# cloud credentials. Its state lives in a Runplane workspace; its one resource
# comes from the repository's test provider (see docs/test-provider.md).

terraform {
  required_providers {
    test = {
      source  = "runplane/test"
      version = "0.1.0"
    }
  }
}

variable "greeting" {
  type    = string
  default = "hello"
}

locals {
  audience = "platform team"
  message  = "${var.greeting}, ${local.audience}"
}

resource "test_thing" "greeting" {
  name    = "greeting"
  content = local.message
}

output "message" {
  value = local.message
}

output "thing_id" {
  value = test_thing.greeting.id
}
