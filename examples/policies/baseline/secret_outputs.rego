# Outputs whose names suggest a secret are marked sensitive.
package runplane.secret_outputs

import rego.v1

secret_words := ["password", "secret", "token", "private_key", "credential"]

deny := [msg |
	some oc in input.output_changes
	not oc.sensitive
	some action in oc.actions
	action in {"create", "update"}
	some word in secret_words
	contains(lower(oc.name), word)
	msg := sprintf("output %s looks like a secret but is not marked sensitive", [oc.name])
]
