# Written as for conftest or `opa eval`: the input is the plan JSON itself.
package main

import rego.v1

approved := {
	"registry.terraform.io/hashicorp/aws",
	"registry.terraform.io/runplane/test",
}

deny contains msg if {
	some rc in input.resource_changes
	not approved[rc.provider_name]
	msg := sprintf("%s comes from %s, which is not approved", [rc.address, rc.provider_name])
}
