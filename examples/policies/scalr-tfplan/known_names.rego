# Written as for Scalr: input.tfplan is the plan JSON, input.tfrun the run.
package runplane_examples.known_names

import rego.v1

deny contains msg if {
	not input.tfrun.is_dry
	some rc in input.tfplan.resource_changes
	"create" in rc.change.actions
	rc.change.after_unknown.name
	msg := sprintf("%s gets its name only at apply time", [rc.address])
}
