# No resource is deleted or replaced, except throwaway helper types.
package runplane.deny_delete

import rego.v1

deletable_types := {"null_resource", "terraform_data", "random_id", "random_string", "time_sleep"}

deny := [msg |
	some rc in input.resource_changes
	"delete" in rc.actions
	not rc.type in deletable_types
	msg := sprintf("%s would be %s", [rc.address, verb(rc.actions)])
]

verb(actions) := "replaced" if "create" in actions

verb(actions) := "deleted" if not "create" in actions
