# Written as for a Spacelift plan policy: input.terraform is the plan JSON,
# input.spacelift.run the run (type PROPOSED or TRACKED).
package spacelift

import rego.v1

deny contains msg if {
	input.spacelift.run.type == "TRACKED"
	some rc in input.terraform.resource_changes
	"delete" in rc.change.actions
	msg := sprintf("tracked run would delete %s", [rc.address])
}
