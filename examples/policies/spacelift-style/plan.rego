# A Spacelift plan policy, as Spacelift keeps them: no configuration file, the plan
# JSON under input.terraform and the run under input.spacelift. Runplane reads the
# directory in Spacelift's shape because its modules read those two roots.
package spacelift

import rego.v1

deny contains sprintf("tracked run would delete %s", [rc.address]) if {
	input.spacelift.run.type == "TRACKED"
	some rc in input.terraform.resource_changes
	"delete" in rc.change.actions
}

warn contains sprintf("%s is replaced", [rc.address]) if {
	some rc in input.terraform.resource_changes
	rc.change.actions == ["delete", "create"]
}
