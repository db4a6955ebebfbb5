version = "v1"

policy "enforce_owner_tag" {
  enabled           = true
  enforcement_level = "hard-mandatory"
}

policy "limit_instance_size" {
  enabled           = false
  enforcement_level = "soft-mandatory"
}

policy "no_local_exec" {
  enabled           = true
  enforcement_level = "hard-mandatory"
}
