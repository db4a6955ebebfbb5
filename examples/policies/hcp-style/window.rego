package window

import rego.v1

# A boolean decision: the plan may go ahead only if it deletes nothing.
default allow := false

allow if {
	deletes := [rc | some rc in input.plan.resource_changes; "delete" in rc.change.actions]
	count(deletes) == 0
}
