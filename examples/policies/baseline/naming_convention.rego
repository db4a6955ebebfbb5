# Resource names are lower_snake_case (no capitals, no dashes).
package runplane.naming_convention

import data.runplane.lib
import rego.v1

deny := [msg |
	some rc in input.resource_changes
	rc.mode == "managed"
	not_snake_case(rc.name)
	some action in rc.actions
	action in lib.changing_actions
	msg := sprintf("%s: resource names should be lower_snake_case", [rc.address])
]

# Cheaper than regex.match with rego-cpp, and as strict for the names Terraform allows
# (letters, digits, underscores and dashes).
not_snake_case(name) if name != lower(name)

not_snake_case(name) if contains(name, "-")
