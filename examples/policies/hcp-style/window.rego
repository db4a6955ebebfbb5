package window

import rego.v1

# A boolean decision: the plan may go ahead only if it destroys nothing.
default allow := false

allow if input.summary.destroy == 0
