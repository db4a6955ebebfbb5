"""Policy sets: loading, validation, content addressing and refused capabilities."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runplane.adapters.rego import validate_policy_set
from runplane.domain.errors import InvalidPolicySet, PolicyModuleRefused
from runplane.domain.policy import (
    Enforcement,
    PolicyDefinition,
    PolicyModule,
    PolicySetContent,
    load_policy_set_dir,
    policy_set_from_document,
)
from runplane.domain.policy_capabilities import FORBIDDEN_BUILTINS, forbidden_builtins

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"

DENY_ALL = 'package runplane.demo\n\nimport rego.v1\n\ndeny := [msg | msg := "no"]\n'


def _document(source: str = DENY_ALL, **policy: Any) -> dict[str, Any]:
    entry = {
        "name": "demo",
        "enforcement": "hard_mandatory",
        "query": "data.runplane.demo.deny",
        "description": "",
        **policy,
    }
    return {
        "name": "demo-set",
        "modules": [{"name": "demo.rego", "source": source}],
        "policies": [entry],
    }


def _content(source: str) -> PolicySetContent:
    return policy_set_from_document(_document(source))


def _write_set(root: Path, meta: dict[str, Any], modules: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy-set.json").write_text(json.dumps(meta))
    for name, source in modules.items():
        (root / name).write_text(source)
    return root


# -- loading and content addressing ---------------------------------------------------------


def test_the_baseline_example_loads_with_ten_policies_of_mixed_enforcement() -> None:
    # When the baseline directory is loaded
    content = load_policy_set_dir(EXAMPLES / "baseline")
    # Then it has ten policies of every enforcement level, and its modules sorted
    assert content.name == "baseline"
    assert len(content.policies) == 10
    assert {p.enforcement for p in content.policies} == set(Enforcement)
    assert [m.name for m in content.modules] == sorted(m.name for m in content.modules)
    assert all(p.query.startswith("data.runplane.") for p in content.policies)
    assert content.digest().startswith("sha256:")
    assert len(content.digest()) == 71


def test_the_deny_delete_example_is_one_hard_mandatory_policy() -> None:
    content = load_policy_set_dir(EXAMPLES / "deny-delete")
    assert [(p.name, p.enforcement) for p in content.policies] == [
        ("deny_delete", Enforcement.HARD_MANDATORY)
    ]


def test_the_transport_document_round_trips_to_the_same_content_address() -> None:
    # Given a loaded set
    content = load_policy_set_dir(EXAMPLES / "baseline")
    # When it travels as JSON and is read back
    again = policy_set_from_document(json.loads(json.dumps(content.to_document())))
    # Then it is the same content with the same digest
    assert again == content
    assert again.digest() == content.digest()


def test_the_digest_ignores_order_but_not_content() -> None:
    # Given the same modules and policies in a different order
    a = PolicyModule("a.rego", "package a\n")
    b = PolicyModule("b.rego", "package b\n")
    p = PolicyDefinition("p", Enforcement.ADVISORY, "data.a.deny")
    q = PolicyDefinition("q", Enforcement.ADVISORY, "data.b.deny")
    one = PolicySetContent("s", (a, b), (p, q))
    two = PolicySetContent("s", (b, a), (q, p))
    # Then their digests are equal
    assert one.digest() == two.digest()
    # And any change to a module's text, a level or a query changes it
    changed_source = PolicySetContent("s", (a, PolicyModule("b.rego", "package b \n")), (p, q))
    changed_level = PolicySetContent(
        "s", (a, b), (p, PolicyDefinition("q", Enforcement.HARD_MANDATORY, "data.b.deny"))
    )
    digests = {one.digest(), changed_source.digest(), changed_level.digest()}
    assert len(digests) == 3


def test_a_directory_is_read_with_its_rego_files_only(tmp_path: Path) -> None:
    # Given a set directory with a README and a subdirectory next to its module
    root = _write_set(
        tmp_path / "set",
        {"name": "s", "policies": [_document()["policies"][0]]},
        {"demo.rego": DENY_ALL, "README.md": "# notes"},
    )
    (root / "sub").mkdir()
    (root / "sub" / "other.rego").write_text("package other\n")
    # When it is loaded
    content = load_policy_set_dir(root)
    # Then only the top-level .rego file is a module
    assert [m.name for m in content.modules] == ["demo.rego"]


# -- structural validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"name": "-bad"}, "policy-set name"),
        ({"name": "x" * 256}, "policy-set name"),
        ({"modules": []}, "no .rego modules"),
        ({"policies": []}, "declares no policies"),
        ({"extra": 1}, "unknown fields: extra"),
        ({"modules": [{"name": "demo.txt", "source": DENY_ALL}]}, "must end in .rego"),
        ({"modules": [{"name": "demo.rego"}]}, "modules[0] must be an object"),
    ],
)
def test_a_malformed_document_is_refused_with_a_typed_error(
    change: dict[str, Any], phrase: str
) -> None:
    # Given a transport document with one thing wrong
    document = {**_document(), **change}
    # When it is read
    with pytest.raises(InvalidPolicySet) as refused:
        policy_set_from_document(document)
    # Then the typed error names the problem
    assert phrase in refused.value.message
    assert refused.value.http_status == 422
    assert refused.value.code == "invalid_policy_set"


@pytest.mark.parametrize(
    ("policy", "phrase"),
    [
        ({"enforcement": "mandatory"}, "is not one of advisory, soft_mandatory, hard_mandatory"),
        ({"enforcement": None}, "enforcement level None"),
        ({"query": "runplane.demo.deny"}, "must be a plain reference"),
        ({"query": "data.runplane.demo.deny; http.send({})"}, "must be a plain reference"),
        ({"query": "data.runplane.demo[0]"}, "must be a plain reference"),
        ({"query": "data.runplane.other.deny"}, "does not name a rule in a package"),
        ({"query": "data.runplane.demo"}, "does not name a rule in a package"),
        ({"query": "data.runplane.demo.denyy"}, "no module of package runplane.demo defines"),
        ({"name": "bad name"}, "policy name 'bad name'"),
        ({"name": "demo\n"}, "policy name 'demo\\n'"),
        ({"query": "data.runplane.demo.deny\n"}, "must be a plain reference"),
        ({"description": "x" * 1001}, "description"),
        ({"severity": "high"}, "unknown fields: severity"),
    ],
)
def test_a_malformed_policy_is_refused_with_a_typed_error(
    policy: dict[str, Any], phrase: str
) -> None:
    with pytest.raises(InvalidPolicySet) as refused:
        policy_set_from_document(_document(**policy))
    assert phrase in refused.value.message


def test_duplicate_policy_names_are_refused() -> None:
    document = _document()
    document["policies"].append(dict(document["policies"][0]))
    with pytest.raises(InvalidPolicySet, match="policy name demo appears more than once"):
        policy_set_from_document(document)


def test_size_caps_are_enforced(tmp_path: Path) -> None:
    # Given a module over 256 KiB, too many modules, and too many bytes in total
    big = DENY_ALL + "#" * (256 * 1024)
    with pytest.raises(InvalidPolicySet, match="a module may be at most 262,144 bytes"):
        _content(big)
    many = _document()
    many["modules"] = [
        {"name": f"m{i:02d}.rego", "source": DENY_ALL.replace("demo", f"d{i}")} for i in range(65)
    ]
    many["modules"][0]["source"] = DENY_ALL
    with pytest.raises(InvalidPolicySet, match="has 65 modules; at most 64"):
        policy_set_from_document(many)
    heavy = _document()
    heavy["modules"] += [
        {"name": f"pad{i}.rego", "source": f"package pad{i}\n" + "#" * 250_000} for i in range(5)
    ]
    with pytest.raises(InvalidPolicySet, match="at most 1,048,576 are allowed"):
        policy_set_from_document(heavy)
    # And a directory's oversized file is refused before it is read
    root = _write_set(tmp_path / "big", {"name": "s", "policies": []}, {"big.rego": big})
    with pytest.raises(InvalidPolicySet, match=r"big\.rego is 262,2"):
        load_policy_set_dir(root)


@pytest.mark.parametrize(
    ("files", "phrase"),
    [
        ({"policy-set.json": "{not json"}, "policy-set.json is not valid JSON"),
        ({"policy-set.json": "[]"}, "must hold a JSON object"),
        ({"policy-set.json": '{"name": "s", "policies": [], "x": 1}'}, "unknown fields: x"),
    ],
)
def test_a_broken_directory_is_refused(tmp_path: Path, files: dict[str, str], phrase: str) -> None:
    tmp_path.joinpath("demo.rego").write_text(DENY_ALL)
    for name, text in files.items():
        tmp_path.joinpath(name).write_text(text)
    with pytest.raises(InvalidPolicySet, match=phrase):
        load_policy_set_dir(tmp_path)


# -- forbidden builtins --------------------------------------------------------------------------


def test_forbidden_builtins_are_found_with_their_lines() -> None:
    source = "\n".join(
        [
            "package runplane.bad",  # 1
            "import rego.v1",  # 2
            "deny contains msg if {",  # 3
            '  resp := http.send({"method": "get", "url": "https://example.com"})',  # 4
            "  now := time.now_ns()",  # 5
            '  n := rand.intn("seed", 10)',  # 6
            '  env := opa.runtime().env["AWS_SECRET_ACCESS_KEY"]',  # 7
            '  id := uuid.rfc4122("x")',  # 8
            '  msg := sprintf("%v", [resp])',  # 9
            "}",  # 10
        ]
    )
    assert forbidden_builtins(source) == [
        ("http.send", 4),
        ("time.now_ns", 5),
        ("rand.intn", 6),
        ("opa.runtime", 7),
        ("uuid.rfc4122", 8),
    ]


def test_comments_and_strings_do_not_count_as_references() -> None:
    source = "\n".join(
        [
            "package runplane.ok",  # 1
            "# we never call http.send or time.now_ns here",  # 2
            'doc := "http.send(x) # and time.now_ns()"',  # 3
            'escaped := "say \\"http.send\\" # not a comment"',  # 4
            "raw := `multi-line raw string",  # 5
            "  mentioning rand.intn(1)",  # 6
            "  and opa.runtime()`",  # 7
            'late := net.lookup_ip_addr("example.com") # a real one, after all that',  # 8
        ]
    )
    assert forbidden_builtins(source) == [("net.lookup_ip_addr", 8)]


def test_every_spelling_of_a_reference_is_found() -> None:
    source = "\n".join(
        [
            "package runplane.sneaky",  # 1
            'a := time["now_ns"]()',  # 2
            "b := time . now_ns()",  # 3
            "c := time",  # 4
            "  .now_ns()",  # 5 (continues the reference of line 4)
            "d := x with time.now_ns as 1",  # 6
            "e := io.jwt.decode_verify(t, {})",  # 7
            "f := rand.anything_new(1)",  # 8
            'g := http["send"]({})',  # 9
        ]
    )
    assert forbidden_builtins(source) == [
        ("time.now_ns", 2),
        ("time.now_ns", 3),
        ("time.now_ns", 4),
        ("time.now_ns", 6),
        ("io.jwt.decode_verify", 7),
        ("rand.anything_new", 8),
        ("http.send", 9),
    ]


def test_pure_builtins_and_data_references_are_allowed() -> None:
    source = "\n".join(
        [
            "package runplane.pure",
            'a := net.cidr_contains("10.0.0.0/8", "10.1.2.3")',
            'b := uuid.parse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")',
            'c := time.parse_rfc3339_ns("2026-11-29T00:00:00Z")',
            "d := io.jwt.decode(input.token)",
            "e := data.http.send",
            "f := input.time.now_ns",
            "g := [x | some x in input.rand]",
        ]
    )
    assert forbidden_builtins(source) == []
    assert "crypto.x509.parse_and_verify_certificates" in FORBIDDEN_BUILTINS


def test_a_module_calling_http_send_is_refused_at_publication() -> None:
    # Given a set whose module calls http.send on line 7
    source = "\n".join(
        [
            "package runplane.demo",
            "",
            "import rego.v1",
            "",
            "deny := [msg |",
            "  some rc in input.resource_changes",
            '  resp := http.send({"method": "post", "url": "https://example.com", "body": rc})',
            '  msg := sprintf("%v", [resp.status_code])',
            "]",
        ]
    )
    content = _content(source)
    # When it is validated for publication
    with pytest.raises(PolicyModuleRefused) as refused:
        validate_policy_set(content)
    # Then it is refused, naming the builtin, the module and the line
    error = refused.value
    assert (error.builtin, error.module, error.line) == ("http.send", "demo.rego", 7)
    assert error.message.startswith("demo.rego line 7 calls http.send, which is not allowed")
    assert error.code == "policy_module_refused"
    assert error.http_status == 422
    assert isinstance(error, InvalidPolicySet)


# -- compilation at publication ------------------------------------------------------------------


def test_the_example_sets_validate() -> None:
    validate_policy_set(load_policy_set_dir(EXAMPLES / "baseline"))
    validate_policy_set(load_policy_set_dir(EXAMPLES / "deny-delete"), isolation="thread")


def test_a_module_that_does_not_parse_is_refused_with_its_line() -> None:
    # Given a module with an unclosed array on line 5 (the file ends on line 7)
    source = 'package runplane.demo\n\nimport rego.v1\n\ndeny := [msg |\n  msg := "x"\n'
    # When it is validated
    with pytest.raises(InvalidPolicySet) as refused:
        validate_policy_set(_content(source))
    # Then the error names the module and the line, without the whole source: regorus
    # names the line where it expected the bracket, rego-cpp the line that opened it
    assert "demo.rego line 7: expecting `]`" in refused.value.message
    with pytest.raises(InvalidPolicySet) as refused:
        validate_policy_set(_content(source), engine_name="regopy")
    assert "demo.rego line 5: this is unclosed" in refused.value.message
    assert "import rego.v1" not in refused.value.message


def test_a_module_calling_an_unknown_function_is_refused() -> None:
    source = "package runplane.demo\n\nimport rego.v1\n\ndeny := [m | m := no_such_function(1)]\n"
    with pytest.raises(InvalidPolicySet, match=r"demo\.rego line 5 calls no_such_function"):
        validate_policy_set(_content(source))


def test_an_unknown_function_in_a_rule_no_policy_queries_is_refused_with_its_line() -> None:
    # Given a module whose queried rule is fine but another rule calls a function the
    # evaluator does not have (rego-cpp only notices when a query reaches it)
    source = (
        "package runplane.demo\n\nimport rego.v1\n\ndeny := []\n\n"
        "helper if {\n\tstrings.no_such(input.x)\n}\n"
    )
    # When it is validated for publication
    with pytest.raises(InvalidPolicySet) as refused:
        validate_policy_set(_content(source))
    # Then it is refused, naming the module, line and function
    assert "demo.rego line 8 calls strings.no_such" in refused.value.message


def test_a_policy_whose_result_is_not_a_collection_is_refused() -> None:
    source = "package runplane.demo\n\nimport rego.v1\n\ndeny := 5\n"
    with pytest.raises(InvalidPolicySet, match="is a number, not a set or array"):
        validate_policy_set(_content(source))


def test_the_policy_domain_loads_no_sdk_and_no_evaluator() -> None:
    code = (
        "import sys, runplane.domain.policy; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'boto3', 'botocore', 'pynamodb', 'pydantic', 'moto', 'cryptography', 'regopy'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
