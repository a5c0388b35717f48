"""The notebook-style examples run headless and draw their charts (examples/, docs/python.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specs import ROOT
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("script, expect", [
    ("tp_pp_heatmap.py", "best: tp="),
    ("sweep_frontier.py", "plans on the frontier of"),
])
def test_example_writes_its_chart(tmp_path, script, expect):
    out = tmp_path / "chart.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--out", str(out)], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout
    data = out.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000
    # the chart checked in under docs/images/ is this script's
    assert (ROOT / "docs/images" / script.replace(".py", ".png")).exists()
