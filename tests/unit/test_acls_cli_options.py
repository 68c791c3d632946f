"""``kmq acls``: options that would be ignored are usage errors (exit 2) naming them.

``--update`` renders the docs' default checklist, so ``--commands``, ``--principal`` and
``--bootstrap-server`` with it were dropped silently; a role given twice in ``--principal``
kept the last one silently."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kmq.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_update_with_options_it_ignores_is_a_usage_error_and_writes_nothing(tmp_path):
    doc = tmp_path / "security.md"
    before = (ROOT / "docs" / "security.md").read_text()  # its checklist markers: an update works
    doc.write_text(before.replace("kmq", "KMQ-OLD", 1))
    for extra in (["--commands"], ["--principal", "consumer=User:a"], ["--bootstrap-server", "b:9092"]):
        result = CliRunner().invoke(main, ["acls", "--update", str(doc), *extra])
        assert result.exit_code == 2 and "--update" in result.output, result.output
    assert doc.read_text() == before.replace("kmq", "KMQ-OLD", 1)


def test_a_role_given_twice_is_a_usage_error_naming_it():
    result = CliRunner().invoke(main, ["acls", "--commands", "--principal", "consumer=User:a",
                                       "--principal", "consumer=User:b"])
    assert result.exit_code == 2 and "'consumer' given twice" in result.output, result.output


def test_the_bootstrap_server_given_is_shell_quoted_in_every_command():
    result = CliRunner().invoke(main, ["acls", "--commands", "--bootstrap-server", "x; rm -rf /"])
    assert result.exit_code == 0, result.output
    commands = [line for line in result.output.splitlines() if line.startswith("kafka-acls.sh")]
    assert commands and all("--bootstrap-server 'x; rm -rf /' " in c for c in commands)


def test_the_default_bootstrap_placeholder_stays_a_shell_variable():
    result = CliRunner().invoke(main, ["acls", "--commands"])
    assert "--bootstrap-server $BOOTSTRAP " in result.output, result.output


def test_an_empty_bootstrap_server_is_a_usage_error():
    for value in ("", "  "):
        result = CliRunner().invoke(main, ["acls", "--commands", "--bootstrap-server", value])
        assert result.exit_code == 2 and "--bootstrap-server" in result.output, result.output


def test_a_principal_with_spaces_or_a_lowercase_type_is_a_usage_error():
    for principal in ("consumer= User:x", "consumer=User:x ", "consumer=user:x", "consumer=User :x"):
        result = CliRunner().invoke(main, ["acls", "--commands", "--principal", principal])
        assert result.exit_code == 2 and "--principal" in result.output and "TYPE:NAME" in result.output, \
            (principal, result.output)
    ok = CliRunner().invoke(main, ["acls", "--commands", "--principal", "consumer=Group:orders team"])
    assert ok.exit_code == 0 and "'Group:orders team'" in ok.output, ok.output
