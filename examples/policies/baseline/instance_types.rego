# EC2 instances use an approved instance type.
package runplane.instance_types

import data.runplane.lib
import rego.v1

allowed := {"t3.micro", "t3.small", "t3.medium", "t3.large", "m6i.large", "m6i.xlarge"}

instance_resources := {"aws_instance", "aws_launch_template"}

deny := [msg |
	some rc in input.resource_changes
	instance_resources[rc.type]
	instance_type := rc.after.instance_type
	is_string(instance_type)
	not instance_type in allowed
	not instance_type in lib.markers
	some action in rc.actions
	action in lib.changing_actions
	msg := sprintf("%s uses the instance type %s, which is not approved", [rc.address, instance_type])
]
