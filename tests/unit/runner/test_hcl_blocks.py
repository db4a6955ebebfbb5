"""The runner's HCL block reading: statements of native files, objects of JSON files."""

from __future__ import annotations

import pytest

from runplane.runner.hcl_blocks import Unreadable, json_bodies, json_document, statements


def _shape(text: str) -> list[tuple[int, str, list[str], list[str | None]]]:
    return [(s.depth, s.end, s.tokens, s.values) for s in statements(text)]


def test_statements_stand_at_the_depth_of_their_blocks() -> None:
    # Given a resource with a nested provisioner block
    text = 'resource "a" b {\n  provisioner "local-exec" {\n    x = 1\n  }\n}\n'
    # When it is read
    # Then each statement is ended by its brace or newline, at its depth, with the
    # literal values of its quoted strings
    assert _shape(text) == [
        (0, "{", ["resource", '"', "b"], ["resource", "a", "b"]),
        (1, "\n", [], []),
        (1, "{", ["provisioner", '"'], ["provisioner", "local-exec"]),
        (2, "\n", [], []),
        (2, "\n", ["x", "=", "1"], ["x", "=", "1"]),
        (2, "}", [], []),
        (1, "\n", [], []),
        (1, "}", [], []),
        (0, "\n", [], []),
    ]
    assert [s.closes_top_block for s in statements(text)][-2] is True


def test_comments_strings_and_heredocs_hide_their_braces() -> None:
    # Given braces in comments, in a string (an interpolation holding one too) and in a
    # heredoc whose interpolation holds a line equal to its marker
    text = (
        "# a { comment\n"
        "/* a block { comment */\n"
        'x = "{ ${"}"} \\"{"\n'
        "y = <<EOT\n{\n${<<EOX\nEOT\n}\nEOX\n}\nEOT\n"
        "// }\n"
    )
    # When it is read
    found = [(s.depth, s.end, s.tokens, s.values) for s in statements(text) if s.tokens]
    # Then no brace is a token: each string or heredoc is one token, a plain string's
    # value is its text, a templated one's or a heredoc's is None
    assert found == [
        (0, "\n", ["x", "=", '"'], ["x", "=", None]),
        (0, "\n", ["y", "=", '"'], ["y", "=", None]),
    ]
    (plain,) = [s for s in statements('z = "a\\tb{"\n') if s.tokens]
    assert plain.values == ["z", "=", "a\tb{"]


@pytest.mark.parametrize(
    "text",
    ["}\n", "a {\n", 'x = "open\n', "/* never closed\n", "y = <<EOT\nno end\n"],
    ids=["close-brace", "open-brace", "string", "comment", "heredoc"],
)
def test_what_cannot_be_followed_is_unreadable(text: str) -> None:
    with pytest.raises(Unreadable):
        list(statements(text))


def test_json_keeps_duplicate_keys_and_refuses_what_is_no_object() -> None:
    document = json_document('{"resource": {"a": {}}, "resource": [{"b": {}}, 3]}')
    assert [key for key, _ in document] == ["resource", "resource"]
    assert [json_bodies(value) for _, value in document] == [[[("a", [])]], [[("b", [])]]]
    with pytest.raises(Unreadable):
        json_document("[1]")
