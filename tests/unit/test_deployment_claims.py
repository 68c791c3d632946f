"""docs/security.md and docs/deployment.md claims checked against the code: `kmq acls`."""

import pytest
from click.testing import CliRunner

from kmq.kafka.acls import acl_commands


@pytest.mark.parametrize("principal", ["orders-app", "User:", ":orders-app", ""])
def test_a_principal_kafka_acls_would_refuse_is_refused_naming_the_form(principal):
    # `--principal consumer=orders-app` printed commands kafka-acls.sh rejects
    # ("Could not parse principal"): the type prefix (User:) was missing.
    with pytest.raises(ValueError, match="consumer.*TYPE:NAME, e.g. User:orders-app"):
        acl_commands(principals={"consumer": principal})


def test_the_cli_says_which_principal_is_wrong():
    from kmq.cli import main

    result = CliRunner().invoke(main, ["acls", "--commands", "--principal", "consumer=orders-app"],
                                env={k: None for k in ("KMQ_PROFILE",)})
    assert result.exit_code == 2, result.output
    assert "--principal" in result.output and "User:orders-app" in result.output


@pytest.mark.parametrize("args", [["--principal", "consumer=User:orders-app"], ["--bootstrap-server", "b:9092"]])
def test_command_options_without_commands_are_a_usage_error_not_ignored(args):
    from kmq.cli import main

    result = CliRunner().invoke(main, ["acls", *args], env={k: None for k in ("KMQ_PROFILE",)})
    assert result.exit_code == 2, result.output
    assert "add --commands" in result.output


def test_a_principal_with_its_type_is_used_as_given():
    out = acl_commands(principals={"consumer": "User:orders-app", "analytics": "Group:bi"})
    assert "--allow-principal User:orders-app --operation Read --operation Describe --topic kmq.queue\n" in out
    assert "--allow-principal Group:bi " in out


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_web_bind_needs_auth_on(host):
    from app.settings import check_web_bind
    from kmq.errors import ConfigError
    from kmq.settings import Settings

    with pytest.raises(ConfigError, match="KMQ_WEB_HOST=.*KMQ_AUTH=off.*KMQ_AUTH=on"):
        check_web_bind(Settings.from_env({}, web_host=host, auth="off"))
    check_web_bind(Settings.from_env({}, web_host=host, auth="on", admin_token="x" * 32))
    check_web_bind(Settings.from_env({}, web_host="127.0.0.1", auth="off"))
