# input.configuration holds provider configurations (names, aliases, version
# constraints, their arguments with credentials masked) and the modules' resources
# and module calls.
package terraform.runplane_examples.providers

import rego.v1

deny contains msg if {
	some key, provider in input.configuration.provider_config
	not provider.version_constraint
	msg := sprintf("provider configuration %s has no version constraint", [key])
}
