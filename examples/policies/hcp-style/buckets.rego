# Written as for HCP Terraform's OPA integration: input.plan is the plan JSON, so a
# resource change's actions and values are under rc.change.
package buckets

import rego.v1

public_acls := {"public-read", "public-read-write"}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "aws_s3_bucket"
	public_acls[rc.change.after.acl]
	msg := sprintf("%s has the public ACL %s", [rc.address, rc.change.after.acl])
}

warn contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "aws_s3_bucket"
	"create" in rc.change.actions
	not rc.change.after.tags.owner
	msg := sprintf("%s has no owner tag", [rc.address])
}
