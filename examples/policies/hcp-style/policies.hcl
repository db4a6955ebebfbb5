# HCP Terraform's OPA policy-set configuration.
policy "no-public-buckets" {
  query             = "data.buckets.deny"
  enforcement_level = "mandatory"
  description       = "S3 buckets are never public."
}

policy "change-window" {
  query             = "data.window.allow"
  enforcement_level = "soft-mandatory"
}

policy "tag-hints" {
  query             = "data.buckets.warn"
  enforcement_level = "advisory"
}
