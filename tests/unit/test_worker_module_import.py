"""`kmq worker MODULE` with a module that does not import: one error line naming the file, the
line and the problem, exit status 1 (a SyntaxError was a whole Python traceback)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import kmq.cli.connect
from kmq.cli.worker import worker
from kmq.errors import ConfigError
from kmq.worker.registry import handlers_in

BROKEN = {
    "jobs_no_colon": ("import kmq\n\n@kmq.handler('emails')\ndef send_email(msg)\n    pass\n",
                      r"^module 'jobs_no_colon' does not compile: jobs_no_colon\.py:4: SyntaxError: "
                      r"expected ':' \(`def send_email\(msg\)`\); fix it"),
    "jobs_indented": ("import kmq\n    x = 1\n",
                      r"^module 'jobs_indented' does not compile: jobs_indented\.py:2: IndentationError: "
                      r"unexpected indent"),
    "jobs_missing_dep": ("import kmq\nimport kmq_test_no_such_dependency\n",
                         r"^module 'jobs_missing_dep' was found but an import in it failed: jobs_missing_dep\.py:2: "
                         r"ModuleNotFoundError: No module named 'kmq_test_no_such_dependency'; install"),
    "jobs_bad_name": ("from kmq import no_such_name\n",
                      r"^module 'jobs_bad_name' was found but an import in it failed: jobs_bad_name\.py:1: "
                      r"ImportError: cannot import name 'no_such_name'"),
    "jobs_imports_broken": ("import jobs_no_colon_too\n",  # the error is in the module it imports
                            r"^module 'jobs_imports_broken' does not compile: jobs_no_colon_too\.py:1: SyntaxError"),
    "jobs_raises": ("import kmq\nLIMIT = 1 / 0\n",
                    r"^module 'jobs_raises' raised while it was imported: jobs_raises\.py:2: "
                    r"ZeroDivisionError: division by zero$"),
}


@pytest.fixture
def jobs_dir(tmp_path, monkeypatch):
    for name, (source, _) in BROKEN.items():
        (tmp_path / f"{name}.py").write_text(source)
    (tmp_path / "jobs_no_colon_too.py").write_text("def f(\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_a_module_that_does_not_import_is_a_config_error_naming_file_and_line(jobs_dir, module):
    with pytest.raises(ConfigError, match=BROKEN[module][1]) as caught:
        handlers_in(module)
    assert caught.value.__cause__ is not None  # chained: the original stays for a debugger


def test_a_module_that_is_not_there_still_says_how_to_name_it(jobs_dir):
    with pytest.raises(ConfigError, match=r"cannot import module 'jobs_absent' .*give its import name"):
        handlers_in("jobs_absent")
    with pytest.raises(ConfigError, match=r"cannot import module 'pkg_absent\.jobs' .*give its import name"):
        handlers_in("pkg_absent.jobs")


@pytest.mark.parametrize("module", ["jobs_no_colon", "jobs_missing_dep"])
def test_kmq_worker_prints_one_error_line_without_a_traceback(jobs_dir, monkeypatch, module):
    monkeypatch.setattr(kmq.cli.connect, "check_broker", lambda settings, timeout_s: None)
    out = CliRunner().invoke(worker, [module])
    assert out.exit_code == 1, out.output
    (line,) = out.output.splitlines()
    assert line.startswith(f"error: module '{module}' ") and f"{module}.py:" in line, line
    assert "Traceback" not in out.output
