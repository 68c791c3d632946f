"""BENCHMARKS.md states only what the result files of benchmark runs hold."""

from bench import report


def test_benchmarks_page_is_the_rendering_of_the_measured_results():
    # Regenerate with `python -m bench.report` after a benchmark run.
    assert report.PAGE.read_text() == report.render(report.load())


def test_every_section_names_the_command_that_measured_it():
    results = report.load()
    page = report.render(results)
    for name, r in results.items():
        assert r["command"] in page, f"{name}: its command is missing from the page"
