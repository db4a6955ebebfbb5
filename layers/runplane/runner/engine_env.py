"""The engine's process environment: the run's ``env`` variables under what the runner
sets itself.

Only the engine's environment gets them: the runner's own process environment never
holds a run's variable, and the policy evaluator never sees one. Layers, lowest first:

1. the run's ``env`` variables (its workspace's and variable sets', resolved at the
   run's creation and read from its encrypted variables artifact);
2. the runner's own: its search path, the engine's home, temporary directory and CLI
   configuration, the run's ID. No ``env`` variable can have one of those names (they
   are reserved, ``domain/env_variables.py``), and a run whose artifact names one is
   refused here rather than trusted.

A phase's cloud credentials, issued later in the phase, override an ``env`` variable of
the same name (``Engine.add_environment``; the run's log names each one overridden,
never a value). The engine adds its automation defaults and the platform's settings itself
(``runner/engine.py``).

Standard library and the domain's name rule only: this runs in the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runplane.domain.env_variables import env_name_problem
from runplane.runner.refusal import Refused


@dataclass(frozen=True)
class EngineEnvironment:
    env: dict[str, str] = field(repr=False)


def engine_environment(
    own: Mapping[str, str],
    variables: Mapping[str, str],
) -> EngineEnvironment:
    """The environment the engine runs with (module docstring). Raises
    :class:`Refused` for a variable whose name the runner would not accept."""
    for name in sorted(variables):
        problem = env_name_problem(name)
        if problem is not None:
            raise Refused(f"the run's environment variables cannot be used: {problem.message}")
        if name in own:
            raise Refused(f"the run's environment variable {name} is the runner's to set")
    return EngineEnvironment({**variables, **own})
