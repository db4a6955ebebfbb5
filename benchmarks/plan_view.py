"""The plan view of a large plan: building the view and rendering the full plan page.

    python -m benchmarks.plan_view [--resources 5000] [--repeat 5]

Builds ``show -json`` documents of 1, 100 (one full page) and ``--resources`` resource
changes (a mix of creates, in-place updates of nested tags, replacements and destroys, a
sensitive password on every tenth, values unknown until apply) and times, for each:
parsing the document, building the view of its first page, and rendering the full plan
page (``plan.html``), and taking a run's sensitive values out of the document first
(``--secrets`` of them, as a run with that many sensitive variables does before its plan
is shown). Reported: the fastest of ``--repeat`` runs in milliseconds, the
page's size, and the page's time as a ratio to the one-resource plan's. Only the
requested page is diffed and rendered, so beyond parsing the large plan should cost
about what one full page does.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from functions.dashboard.pages import templates
from runplane.domain.plan_secrets import Secrets, without_secrets
from runplane.domain.plan_view import PlanView, build_view, parse
from runplane.services.plan_views import PlanState, RunPlan

SESSION = SimpleNamespace(csrf="token", principal=SimpleNamespace(display="bench", ref="user:b"))


def _change(n: int) -> dict[str, Any]:
    kind = ("create", "update", "replace", "destroy")[n % 4]
    before = {
        "name": f"web-{n}",
        "tags": {"Name": f"web-{n}", "Team": "platform", "CostCenter": "1234"},
        "ingress": [{"from_port": 80, "to_port": 80, "cidr_blocks": ["10.0.0.0/8"]}],
        "password": f"secret-{n}",
    }
    after = {**before, "tags": {**before["tags"], "Name": f"web-{n}-new"}}
    sensitive = {"password": True} if n % 10 == 0 else {}
    actions = {
        "create": ["create"],
        "update": ["update"],
        "replace": ["delete", "create"],
        "destroy": ["delete"],
    }[kind]
    return {
        "address": f'module.app["{n % 7}"].aws_instance.web[{n}]',
        "mode": "managed",
        "type": "aws_instance",
        "name": "web",
        "provider_name": "registry.terraform.io/hashicorp/aws",
        "change": {
            "actions": actions,
            "before": None if kind == "create" else before,
            "after": None if kind == "destroy" else after,
            "after_unknown": {"id": True, "arn": True},
            "before_sensitive": sensitive,
            "after_sensitive": sensitive,
        },
    }


def document(resources: int) -> bytes:
    plan = {
        "format_version": "0.2",
        "terraform_version": "1.0.3",
        "resource_changes": [_change(n) for n in range(resources)],
        "output_changes": {
            "url": {
                "actions": ["update"],
                "before": "https://a",
                "after": "https://b",
                "after_unknown": False,
                "before_sensitive": False,
                "after_sensitive": False,
            }
        },
    }
    return json.dumps(plan).encode()


def _fastest(repeat: int, work: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best * 1000, result


def measure(resources: int, repeat: int, secrets: int) -> dict[str, Any]:
    raw = document(resources)
    parse_ms, parsed = _fastest(repeat, lambda: parse(raw))
    assert isinstance(parsed, dict)
    # Secrets the document does not hold, so every string is looked at and none hidden.
    found = Secrets(f"not-in-the-plan-{n:04d}-value" for n in range(secrets))
    secrets_ms, _ = _fastest(repeat, lambda: without_secrets(parsed, found))
    view_ms, view = _fastest(repeat, lambda: build_view(parsed))
    assert isinstance(view, PlanView)
    run_plan = RunPlan("run-bench", PlanState.SHOWN, view)
    page = templates().get_template("plan.html")
    page_ms, html = _fastest(
        repeat, lambda: page.render(session=SESSION, run_id="run-bench", run_plan=run_plan)
    )
    assert isinstance(html, str)
    return {
        "resources": resources,
        "document_bytes": len(raw),
        "parse_ms": parse_ms,
        "secrets_ms": secrets_ms,
        "view_ms": view_ms,
        "page_ms": page_ms,
        "page_bytes": len(html.encode()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--secrets", type=int, default=5)
    args = parser.parse_args()
    templates().get_template("plan.html")  # compiled once, as in a warm process
    rows = [measure(n, args.repeat, args.secrets) for n in (1, 100, args.resources)]
    tiny = rows[0]
    print(
        f"| resources | document | parse ms | {args.secrets} secrets out ms | view ms | page ms "
        "| page size | page ms / tiny's |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(
            f"| {row['resources']} | {row['document_bytes'] / 1e6:.2f} MB | "
            f"{row['parse_ms']:.2f} | {row['secrets_ms']:.2f} | {row['view_ms']:.2f} | "
            f"{row['page_ms']:.2f} | "
            f"{row['page_bytes'] / 1e3:.0f} kB | {row['page_ms'] / tiny['page_ms']:.0f}x |"
        )


if __name__ == "__main__":
    main()
