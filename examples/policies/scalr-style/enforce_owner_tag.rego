# Written as for Scalr: input.tfplan is the plan JSON (Rego v0, as Scalr's own
# policies are; Runplane upgrades it for the evaluator).
package terraform.enforce_owner_tag

import input.tfplan as tfplan

deny[reason] {
	rc := tfplan.resource_changes[_]
	rc.change.actions[_] == "create"
	startswith(rc.type, "aws_")
	not rc.change.after.tags.owner
	reason := sprintf("%s: set tags.owner", [rc.address])
}
