package terraform.limit_instance_size

import input.tfplan as tfplan

deny[reason] {
	rc := tfplan.resource_changes[_]
	rc.type == "aws_instance"
	endswith(rc.change.after.instance_type, ".metal")
	reason := sprintf("%s: metal instances need approval", [rc.address])
}
