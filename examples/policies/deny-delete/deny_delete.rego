# No resource change may delete anything (a replacement deletes too).
package runplane.deny_delete

import rego.v1

deny := [msg |
	some rc in input.resource_changes
	"delete" in rc.actions
	msg := sprintf("%s would be deleted", [rc.address])
]
