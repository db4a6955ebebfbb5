package terraform.limit_instance_size

deny[reason] {
	rc := input.resource_changes[_]
	rc.type == "aws_instance"
	endswith(rc.after.instance_type, ".metal")
	reason := sprintf("%s: metal instances need approval", [rc.address])
}
