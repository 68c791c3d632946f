"""The SDK stays light: importing kmq pulls in no service or optional-extra code."""

import subprocess
import sys


def test_import_kmq_does_not_import_faust_pyspark_or_the_service():
    code = ("import sys, kmq; kmq.Client; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('faust', 'mode', 'pyspark', 'app', 'agents', 'tables', 'aiokafka')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    assert out.stdout.strip() == "[]"
