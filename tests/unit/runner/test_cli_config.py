"""The one writer of the engine CLI configuration's HCL."""

from __future__ import annotations

from runplane.runner.cli_config import cli_config, hcl_string, provider_installation


def test_a_mirror_path_is_quoted_with_template_introducers_neutralised() -> None:
    # Given a path with every character HCL treats specially
    # When it is written as an HCL string
    # Then nothing in it can end the string or start a template
    assert hcl_string('/m/a"b\\c${x}%{y}\n') == '"/m/a\\"b\\\\c$${x}%%{y}\\n"'


def test_the_configuration_declares_services_credentials_then_installation() -> None:
    # Given services at one host, a token and a mirror block
    installation = provider_installation("/mirror", ["registry.terraform.io/runplane/*"])
    # When the configuration is written
    text = cli_config(
        "app.test",
        {"tfe.v2": "http://app.test/api/v2/"},
        "t.k-1",
        installation=installation,
        disable_checkpoint=True,
    )
    # Then it is exactly the three blocks, in order
    assert text == (
        "disable_checkpoint = true\n\n"
        'host "app.test" {\n'
        "  services = {\n"
        '    "tfe.v2" = "http://app.test/api/v2/",\n'
        "  }\n"
        "}\n\n"
        'credentials "app.test" {\n'
        '  token = "t.k-1"\n'
        "}\n\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        '    path    = "/mirror"\n'
        '    include = ["registry.terraform.io/runplane/*"]\n'
        "  }\n"
        "  direct {\n"
        '    exclude = ["registry.terraform.io/runplane/*"]\n'
        "  }\n"
        "}\n"
    )


def test_without_installation_the_configuration_ends_after_the_credentials() -> None:
    text = cli_config("h", {"tfe.v2": "http://h/"}, "t")
    assert text.endswith('credentials "h" {\n  token = "t"\n}\n')
    assert "disable_checkpoint" not in text
