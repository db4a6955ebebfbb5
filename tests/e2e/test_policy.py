"""Policy as code on the embedded stack: real plans, the real evaluator, over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runplane.cli import main
from runplane.client import ApiError
from runplane.domain.policy import load_policy_set_dir
from tests.e2e.conftest import Local, unique
from tests.e2e.test_managed_runs import HELLO, SECRET_VALUE, config, new_workspace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"

# The hello configuration with its one resource removed: a plan that deletes it.
WITHOUT_THE_RESOURCE = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
"""


def soft_review_policy(name: str) -> dict[str, object]:
    source = (
        "package runplane.review\n\nimport rego.v1\n\n"
        "deny := [m |\n\tsome rc in input.resource_changes\n"
        '\t"create" in rc.actions\n'
        '\tm := sprintf("%s is new: the owning team reviews it", [rc.address])\n]\n'
    )
    return {
        "name": name,
        "modules": [{"name": "review.rego", "source": source}],
        "policies": [
            {
                "name": "review_new_resources",
                "enforcement": "soft_mandatory",
                "query": "data.runplane.review.deny",
            }
        ],
    }


def test_a_soft_failure_waits_for_an_override_and_a_destroy_is_blocked(
    local: Local, tmp_path: Path
) -> None:
    client = local.client
    ws = new_workspace(local, "policy")

    # Given a soft-mandatory policy on new resources, attached to the workspace
    soft = client.publish_policy_set(soft_review_policy(unique("review")))
    client.attach_policy_set(soft["name"], [ws])

    # When a run creating a resource plans
    run = client.create_run(ws, HELLO)
    review = client.watch(run["id"], until=["awaiting_approval"], timeout=120)

    # Then it waits for approval with the policy's finding reported
    assert review["status"] == "awaiting_approval"
    assert review["policy"]["status"] == "soft_failed"
    [result] = review["policy"]["results"]
    assert result["messages"] == ["test_thing.greeting is new: the owning team reviews it"]
    assert (
        review["approval"]["binding"]["policy_result_digest"] == (review["policy"]["result_digest"])
    )
    # And approving it before an override is refused
    with pytest.raises(ApiError) as refused:
        client.decide(run["id"], "approve")
    assert refused.value.status == 409
    assert refused.value.body["code"] == "policy_override_required"

    # When an admin overrides with a reason and approves / Then it applies
    overridden = client.override_policy(run["id"], "new resources reviewed in the change ticket")
    assert overridden["policy"]["status"] == "overridden"
    client.decide(run["id"], "approve")
    applied = client.watch(run["id"], timeout=120)
    assert applied["status"] == "succeeded"

    # Given the deny-delete set attached instead
    client.attach_policy_set(soft["name"], [])
    content = load_policy_set_dir(EXAMPLES / "deny-delete")
    client.publish_policy_set(content.to_document())
    client.attach_policy_set(content.name, [ws])

    # When a run would delete the resource
    destroy = client.create_run(ws, config(tmp_path, WITHOUT_THE_RESOURCE))
    blocked = client.watch(destroy["id"], timeout=120)

    # Then the hard-mandatory policy fails the run before any approval
    assert blocked["status"] == "policy_failed"
    assert blocked["approval"] is None
    assert blocked["apply"]["status"] == "closed"
    assert blocked["status_reason"] == "POLICY_FAILED: deny-delete/deny_delete"
    [denied] = blocked["policy"]["results"]
    assert denied["outcome"] == "failed"
    assert denied["messages"] == ["test_thing.greeting would be deleted"]
    assert blocked["policy"]["policy_sets"] == [
        {
            "name": "deny-delete",
            "digest": content.digest(),
            "input_shape": "runplane",
            "input_digest": blocked["policy"]["input_digest"],
        }
    ]
    assert blocked["policy"]["input_digest"].startswith("sha256:")


def test_a_module_calling_http_send_is_refused_over_http(local: Local) -> None:
    document = soft_review_policy(unique("exfiltrate"))
    document["modules"] = [
        {
            "name": "review.rego",
            "source": "package runplane.review\n\nimport rego.v1\n\n"
            'deny := [r.body | r := http.send({"method": "get", "url": "https://x.test"})]\n',
        }
    ]
    with pytest.raises(ApiError) as refused:
        local.client.publish_policy_set(document)
    assert refused.value.status == 422
    assert refused.value.body["code"] == "policy_module_refused"
    assert "http.send" in refused.value.body["message"]
    assert "line 5" in refused.value.body["message"]
    assert document["name"] not in {s["name"] for s in local.client.list_policy_sets()}


def test_the_cli_publishes_lists_and_attaches_a_policy_set_directory(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an organization of its own (attaching everywhere touches no other test)
    org, token = local.other_organization(unique("policy-cli"))
    connect = ["--url", local.url, "--token", token, "--organization", org]

    # When the deny-delete directory is published, attached everywhere, and listed
    assert main(["policy", "publish", str(EXAMPLES / "deny-delete"), *connect]) == 0
    assert main(["policy", "attach", "deny-delete", "--all", *connect]) == 0
    capsys.readouterr()
    assert main(["policy", "list", "--json", *connect]) == 0

    # Then the listing shows the published content's digest, attached everywhere
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "deny-delete"
    assert listed["digest"] == load_policy_set_dir(EXAMPLES / "deny-delete").digest()
    assert listed["all_workspaces"] is True
    assert listed["policies"][0]["enforcement"] == "hard_mandatory"


def test_a_conftest_style_v0_directory_publishes_with_its_original_text(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an organization of its own and a conftest-style directory of Rego v0 modules
    org, token = local.other_organization(unique("policy-v0"))
    connect = ["--url", local.url, "--token", token, "--organization", org]
    content = load_policy_set_dir(EXAMPLES / "conftest-style")

    # When it is published through the CLI
    capsys.readouterr()
    status = main(["policy", "publish", str(EXAMPLES / "conftest-style"), *connect])

    # Then the control plane accepts it, addressed by the authors' text, and the CLI
    # says which module was upgraded from v0
    out = capsys.readouterr().out
    assert status == 0
    assert content.digest() in out
    assert "main.rego: Rego v0, upgraded to v1 for evaluation" in out
    assert main(["policy", "list", "--json", *connect]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["digest"] == content.digest()
    assert sorted(p["name"] for p in listed["policies"]) == ["main.deny", "main.warn_names"]
    # And the listing says which modules are read as Rego v0, and the input shape its
    # packaging gave it (conftest's: the plan JSON itself)
    assert listed["rego_v0_modules"] == ["lib/naming.rego", "main.rego"]
    assert listed["input_shape"] == "bare"
    assert main(["policy", "list", *connect]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith(f"conftest-style  {content.digest()}  version 1  input bare  ")
    assert "    main.rego: Rego v0, upgraded to v1 for evaluation" in text


def test_the_listing_shows_each_sets_input_shape(
    local: Local, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an organization of its own and a set declaring the Scalr input shape
    org, token = local.other_organization(unique("policy-shape-list"))
    connect = ["--url", local.url, "--token", token, "--organization", org]
    directory = tmp_path / "scalr"
    directory.mkdir()
    (directory / "tags.rego").write_text(
        "package scalr.tags\n\nimport rego.v1\n\n"
        'deny contains "untagged" if {\n\tsome rc in input.tfplan.resource_changes\n'
        "\tnot rc.change.after.tags\n}\n",
        encoding="utf-8",
    )
    (directory / "policy-set.json").write_text(
        json.dumps(
            {
                "name": "scalr-tags",
                "input_shape": "tfplan",
                "policies": [
                    {"name": "tags", "enforcement": "advisory", "query": "data.scalr.tags.deny"}
                ],
            }
        ),
        encoding="utf-8",
    )
    # When it is published and the sets are listed
    assert main(["policy", "publish", str(directory), *connect]) == 0
    capsys.readouterr()
    assert main(["policy", "list", *connect]) == 0
    # Then the line of the set names its shape, and no module as v0
    out = capsys.readouterr().out
    assert "scalr-tags  sha256:" in out
    assert "  input tfplan  not attached" in out
    assert "Rego v0" not in out


# A configuration that unmarks its sensitive variable (nonsensitive) into an attribute.
UNMARKED_SECRET = """
terraform {
  required_providers {
    test = { source = "runplane/test", version = "0.1.0" }
  }
}
variable "token" {
  type      = string
  sensitive = true
}
resource "test_thing" "leak" {
  name    = "leak"
  content = nonsensitive(var.token)
}
"""


def test_a_policy_never_sees_a_secret_the_configuration_unmarked(
    local: Local, tmp_path: Path
) -> None:
    client = local.client
    ws = new_workspace(local, "policy-secret")
    # Given an advisory policy that repeats every created resource's content in its message
    source = (
        "package runplane.echo\n\nimport rego.v1\n\n"
        "deny := [m |\n\tsome rc in input.resource_changes\n"
        '\t"create" in rc.actions\n'
        '\tm := sprintf("%s holds %v", [rc.address, rc.after.content])\n]\n'
    )
    echo = client.publish_policy_set(
        {
            "name": unique("echo"),
            "modules": [{"name": "echo.rego", "source": source}],
            "policies": [
                {"name": "echo", "enforcement": "advisory", "query": "data.runplane.echo.deny"}
            ],
        }
    )
    client.attach_policy_set(echo["name"], [ws])

    # When a plan runs a configuration that passes the workspace's sensitive variable
    # through nonsensitive() into the resource
    client.set_variable(ws, "token", SECRET_VALUE, sensitive=True)
    run = client.create_run(ws, config(tmp_path, UNMARKED_SECRET), kind="plan_only")
    done = client.watch(run["id"], timeout=180)

    # Then the policy judged the plan and saw the value only as sensitive: its message,
    # the review and the plan view never hold the secret
    assert done["status"] == "succeeded", done
    [result] = done["policy"]["results"]
    assert result["messages"] == ["test_thing.leak holds (sensitive)"]
    assert SECRET_VALUE not in json.dumps(done)
    assert SECRET_VALUE not in json.dumps(client.run_plan(run["id"]))
