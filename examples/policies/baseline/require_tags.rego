# Taggable resources that are created or updated carry the required tags.
package runplane.require_tags

import data.runplane.lib
import rego.v1

required_tags := ["environment", "owner"]

taggable_types := {
	"aws_db_instance", "aws_ebs_volume", "aws_iam_role", "aws_instance",
	"aws_lambda_function", "aws_s3_bucket", "aws_security_group", "aws_subnet", "aws_vpc",
}

deny := [msg |
	some rc in input.resource_changes
	taggable_types[rc.type]
	some action in rc.actions
	action in lib.changing_actions
	is_object(rc.after)

	# rc.after.tags[tag] is undefined when tags is null or hidden as a whole.
	missing := [tag | some tag in required_tags; not rc.after.tags[tag]]
	count(missing) > 0

	# concat, not sprintf: rego-cpp 1.5.2 formats a concat result with its JSON quotes.
	msg := concat("", [rc.address, " is missing required tags: ", concat(", ", missing)])
]
