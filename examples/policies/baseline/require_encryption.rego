# Databases and volumes encrypt their storage at rest.
package runplane.require_encryption

import data.runplane.lib
import rego.v1

# The attribute that turns encryption on, per resource type.
encryption_attribute := {
	"aws_db_instance": "storage_encrypted",
	"aws_rds_cluster": "storage_encrypted",
	"aws_ebs_volume": "encrypted",
	"aws_efs_file_system": "encrypted",
}

deny := [msg |
	some rc in input.resource_changes
	attribute := encryption_attribute[rc.type]
	is_object(rc.after)
	not rc.after[attribute] == true
	some action in rc.actions
	action in lib.changing_actions
	msg := sprintf("%s does not encrypt its storage (%s is not true)", [rc.address, attribute])
]
