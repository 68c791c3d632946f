"""`kmq --help` lists `kmq spark` without importing pyspark (the extra is optional)."""

import subprocess
import sys


def test_the_cli_lists_spark_jobs_without_importing_pyspark():
    code = ("import sys; from click.testing import CliRunner; from kmq.cli import main; "
            "out = CliRunner().invoke(main, ['spark', '--help']).output; "
            "print('percentiles' in out and 'never-acked' in out, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'pandas')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    assert out.stdout.strip() == "True []"
