# The demo configuration: plans and applies with the offline engine and no
# cloud credentials. Its state lives in a Runplane workspace.

variable "greeting" {
  type    = string
  default = "hello"
}

locals {
  audience = "platform team"
  message  = "${var.greeting}, ${local.audience}"
}

output "message" {
  value = local.message
}

output "length" {
  value = length(local.message)
}
