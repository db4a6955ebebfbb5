# IAM policies never allow every action.
package runplane.no_wildcard_iam

import data.runplane.lib
import rego.v1

policy_types := {"aws_iam_policy", "aws_iam_role_policy", "aws_iam_user_policy", "aws_iam_group_policy"}

wildcards := {"*", "iam:*"}

deny := [msg |
	some rc in input.resource_changes
	policy_types[rc.type]
	document := rc.after.policy
	is_string(document)

	# A cheap textual filter before parsing: a wildcard action is a quoted "*" or "iam:*".
	mentions_wildcard(document)
	some action in rc.actions
	action in lib.changing_actions
	json.is_valid(document)
	some statement in statements(json.unmarshal(document))
	statement.Effect == "Allow"
	some granted in as_array(statement.Action)
	granted in wildcards
	msg := sprintf("%s allows every action (\"Action\": \"%s\")", [rc.address, granted])
]

mentions_wildcard(document) if contains(document, "\"*\"")

mentions_wildcard(document) if contains(document, "\"iam:*\"")

statements(document) := document.Statement if is_array(document.Statement)

statements(document) := [document.Statement] if is_object(document.Statement)

as_array(value) := value if is_array(value)

as_array(value) := [value] if is_string(value)
