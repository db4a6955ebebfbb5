package buckets

import rego.v1

public_acls := {"public-read", "public-read-write"}

deny contains msg if {
	some rc in input.resource_changes
	rc.type == "aws_s3_bucket"
	public_acls[rc.after.acl]
	msg := sprintf("%s has the public ACL %s", [rc.address, rc.after.acl])
}

warn contains msg if {
	some rc in input.resource_changes
	rc.type == "aws_s3_bucket"
	"create" in rc.actions
	not rc.after.tags.owner
	msg := sprintf("%s has no owner tag", [rc.address])
}
