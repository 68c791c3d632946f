"""One concept per module, about 300 lines at most (STYLE.md, rule 1): checked, so a module
does not grow back into several (bench/chaos.py had reached 709 lines, bench/report.py 642;
in tests/, test_web.py 543 and test_deployment.py 474). The tests are modules like any other:
conftest.py and the helper modules count too."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("kmq", "app", "tables", "agents", "web", "bench", "tests")
MAX_LINES = 330  # "about 300": room for a docstring's growth, not for a second concept


def test_no_module_holds_more_than_one_concepts_worth_of_lines():
    too_long = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            n = len(path.read_text().splitlines())
            if n > MAX_LINES:
                too_long[str(path.relative_to(ROOT))] = n
    assert not too_long, (f"modules over {MAX_LINES} lines: {too_long}; split each by concept "
                          "(STYLE.md, rule 1), as bench/chaos.py was into chaos_config, chaos_processes "
                          "and chaos_accounting, and tests/integration/test_web.py into test_web_numbers "
                          "and test_web_access (what both use moved once, to web_deployment and browser)")


def test_the_folders_checked_hold_the_code():
    assert all((ROOT / folder).is_dir() and any((ROOT / folder).rglob("*.py")) for folder in FOLDERS)
