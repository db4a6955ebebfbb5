# Only approved providers create or update resources.
package runplane.allowed_providers

import data.runplane.lib
import rego.v1

allowed := {
	"registry.terraform.io/hashicorp/aws",
	"registry.terraform.io/hashicorp/null",
	"registry.terraform.io/hashicorp/random",
	"registry.terraform.io/hashicorp/time",
	"registry.opentofu.org/hashicorp/aws",
	"registry.opentofu.org/hashicorp/null",
	"registry.opentofu.org/hashicorp/random",
	"registry.opentofu.org/hashicorp/time",
	# The repository's offline test provider (examples/providers), used by the demo.
	"registry.terraform.io/runplane/test",
}

deny := [msg |
	some rc in input.resource_changes
	not rc.provider_name in allowed
	some action in rc.actions
	action in lib.changing_actions
	msg := sprintf("%s uses the provider %s, which is not approved", [rc.address, rc.provider_name])
]
