"""BENCHMARKS.md states only what the result files of benchmark runs hold."""

from bench import report, report_format


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
    assert report_format._payload(report_format._options(lz4)) == " (random, lz4)"
    assert report_format._payload(report_format._options({"command": "python -m bench.shared throughput --runs 3"})) == ""
    assert report_format._payload({"payload": "random", "compression": "none"}) == " (random)"
    assert report_format._payload({"size": 100}) == ""  # runs saved before these options


def test_a_lateness_change_shows_every_run_and_the_ratio_of_the_medians():
    from bench import lateness_ab

    def run(tree, p50):
        return {"tree": tree, "redelivery": {"p50_ms": p50, "p99_ms": 40, "max_ms": 50},
                "delayed": {"p50_ms": 10, "p99_ms": 40, "max_ms": 50}}
    r = {"command": "python -m bench.lateness_ab --name x", "machine": "m", "when": "w", "load": False,
         "baseline": "old", "change": "new",
         "runs": [run("baseline", 20), run("change", 30), run("baseline", 24), run("change", 36),
                  run("baseline", 22), run("change", 33)]}
    page = "\n".join(lateness_ab.section({"lateness_ab-x": r}))
    assert "| redelivery p50 | 22 (20, 24, 22) | 33 (30, 36, 33) | **1.50** |" in page
    assert "| delayed p99 | 40 (40, 40, 40) | 40 (40, 40, 40) | **1.00** |" in page
