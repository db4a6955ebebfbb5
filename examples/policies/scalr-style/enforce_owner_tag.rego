package terraform.enforce_owner_tag

deny[reason] {
	rc := input.resource_changes[_]
	rc.actions[_] == "create"
	startswith(rc.type, "aws_")
	not rc.after.tags.owner
	reason := sprintf("%s: set tags.owner", [rc.address])
}
