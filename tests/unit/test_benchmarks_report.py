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


def test_a_run_with_random_payloads_or_compression_says_so():
    lz4 = {"command": "python -m bench.shared throughput --messages 300000 --payload random --compression lz4"}
    assert report._payload(report._options(lz4)) == " (random, lz4)"
    assert report._payload(report._options({"command": "python -m bench.shared throughput --runs 3"})) == ""
    assert report._payload({"payload": "random", "compression": "none"}) == " (random)"
    assert report._payload({"size": 100}) == ""  # runs saved before these options
