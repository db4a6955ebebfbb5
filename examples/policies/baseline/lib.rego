# Values shared by the baseline policies. Policies read the sanitized plan
# derivative: input.resource_changes[_] has address, type, name, provider_name,
# actions, before and after; values the sanitizer hides are the strings
# "(sensitive)" and "(known after apply)".
#
# Written for rego-cpp's speed: each policy is an array comprehension (partial
# set rules and set comprehensions cost time quadratic in their size), filters
# on the resource type first, and reads attributes directly (rc.after.acl is
# undefined, not an error, when after is hidden or null).
package runplane.lib

import rego.v1

markers := {"(sensitive)", "(known after apply)"}

# Actions that create or update a resource (a replacement creates it again).
changing_actions := {"create", "update"}
