# Written as for HCP Terraform's OPA integration: input.plan is the plan JSON.
package terraform.runplane_examples.changes

import rego.v1

deny contains msg if {
	some rc in input.plan.resource_changes
	"delete" in rc.change.actions
	msg := sprintf("%s would be deleted (workspace %s)", [rc.address, input.run.workspace.name])
}
