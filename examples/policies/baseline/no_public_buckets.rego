# S3 buckets are never made public, by ACL or by weakening a public access block.
package runplane.no_public_buckets

import data.runplane.lib
import rego.v1

public_acls := {"public-read", "public-read-write", "authenticated-read"}

acl_types := {"aws_s3_bucket", "aws_s3_bucket_acl"}

deny := array.concat(public_acl, weakened_block)

public_acl := [msg |
	some rc in input.resource_changes
	acl_types[rc.type]
	acl := rc.after.acl
	acl in public_acls
	some action in rc.actions
	action in lib.changing_actions
	msg := sprintf("%s grants public access with the %s ACL", [rc.address, acl])
]

weakened_block := [msg |
	some rc in input.resource_changes
	rc.type == "aws_s3_bucket_public_access_block"
	some action in rc.actions
	action in lib.changing_actions
	after := rc.after
	not all_blocked(after)
	msg := sprintf("%s does not block every kind of public access", [rc.address])
]

all_blocked(after) if {
	after.block_public_acls == true
	after.block_public_policy == true
	after.ignore_public_acls == true
	after.restrict_public_buckets == true
}
