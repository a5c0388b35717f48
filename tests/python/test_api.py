"""`import trainsim` against the CLI: the same inputs give the same report, byte for byte.

ctest runs this with PYTHONPATH=build/python, TRAINSIM_CLI (the built binary) and
TRAINSIM_SOURCE_DIR (the checkout) set (tests/CMakeLists.txt, test `python_api`).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

import trainsim

from specs import A100, CLI, GPT3, GPT3_PLAN, H100, LLAMA8B, ROOT


def cli(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == expect, done.stderr
    return done


def load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


# --- the same report as the CLI ------------------------------------------------------------------

def test_run_json_is_the_cli_output_byte_for_byte():
    report = trainsim.run(A100, GPT3, GPT3_PLAN)
    expected = cli("run", "-t", A100, "-w", GPT3, "-s", GPT3_PLAN, "--format", "json").stdout
    assert report.to_json() == expected
    assert report.to_dict() == json.loads(expected)
    assert report.table() == cli("run", "-t", A100, "-w", GPT3, "-s", GPT3_PLAN).stdout


def test_run_attributes_are_the_report_fields():
    report = trainsim.run(A100, GPT3, GPT3_PLAN)
    data = report.to_dict()
    assert report.step_time_s == data["step_time_s"] > 0
    assert report.fits is True and report.mfu == data["mfu"]
    assert report.peak_memory_bytes == data["peak_memory_bytes"]
    assert report.strategy["tp"] == 8 and report.strategy["vpp"] == 3  # any JSON field as an attribute
    with pytest.raises(AttributeError, match="no field 'nonsense'"):
        report.nonsense


def test_specs_as_dicts_and_objects_give_the_file_report():
    by_file = trainsim.run(A100, GPT3, GPT3_PLAN).to_dict()
    topology = trainsim.Topology.from_dict(load(A100))
    workload = trainsim.Workload.from_dict(load(GPT3))
    strategy = trainsim.Strategy.from_dict({"tp": 8, "pp": 8, "dp": 16, "sp": True, "recompute": "selective",
                                            "schedule": "interleaved", "vpp": 3})
    assert trainsim.run(topology, workload, strategy).to_dict() == by_file
    assert trainsim.run(load(A100), load(GPT3), trainsim.Strategy.parse(GPT3_PLAN)).to_dict() == by_file
    assert trainsim.run(pathlib.Path(A100), pathlib.Path(GPT3), GPT3_PLAN).to_dict() == by_file


def test_a_plan_that_does_not_fit_is_reported_not_raised():
    plan = "tp=1,pp=1,gpus=64"  # 175B parameters on each GPU
    report = trainsim.run(A100, GPT3, plan, analytic=True)
    assert report.fits is False
    done = cli("run", "-t", A100, "-w", GPT3, "-s", plan, "--analytic", "--format", "json", expect=1)
    assert report.to_json() == done.stdout


def test_hugging_face_config_with_training_settings():
    config = ROOT / "workloads/hf/llama-3.1-8b/config.json"
    if not config.exists():
        pytest.skip(f"{config} not in this checkout")
    args = ("-t", H100, "-w", str(config), "-s", "tp=4,gpus=16", "--seq-len", "4096", "--global-batch", "32")
    report = trainsim.run(H100, trainsim.Workload.from_hf_config(config), "tp=4,gpus=16", seq_len=4096,
                          global_batch=32)
    assert report.fits and report.workload == "llama-3.1-8b"
    assert report.to_json() == cli("run", *args, "--format", "json").stdout


def test_megatron_launch_line():
    line = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
            "--max-position-embeddings 4096 --vocab-size 128256 --micro-batch-size 1 --global-batch-size 1024 --bf16 "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2")
    report = trainsim.run(H100, None, trainsim.Strategy.from_megatron(line))
    expected = cli("run", "-t", H100, "-s", "megatron:" + line, "--format", "json").stdout
    assert report.to_json() == expected


def test_sweep_equals_the_cli_sweep_and_to_pandas():
    result = trainsim.sweep(H100, LLAMA8B, gpus=64, top=5)
    expected = cli("sweep", "-t", H100, "-w", LLAMA8B, "--gpus", "64", "--top", "5", "--quiet",
                   "--format", "json").stdout
    assert result.to_json() == expected
    frame = result.to_pandas()
    assert list(frame["rank"]) == [1, 2, 3, 4, 5]
    assert list(frame["strategy"]) == [p["strategy"] for p in json.loads(expected)["top"]]
    assert frame["step_time_s"].is_monotonic_increasing


def test_sweep_fix_as_dict_or_text_and_threads_do_not_change_it():
    by_text = trainsim.sweep(H100, LLAMA8B, gpus=[64], top=3, fix="tp=2,zero=1", threads=1)
    by_dict = trainsim.sweep(H100, LLAMA8B, gpus=[64], top=3, fix={"tp": 2, "zero": 1}, threads=2)
    assert by_text.to_json() == by_dict.to_json()
    assert all(p["strategy"].startswith("tp=2,") for p in by_text.plans)


def test_sharded_sweep_merges_to_the_whole(tmp_path):
    whole = trainsim.sweep(H100, LLAMA8B, gpus=64, top=4)
    files = []
    for i in range(3):
        part = trainsim.sweep(H100, LLAMA8B, gpus=64, top=4, shard=f"{i}/3")
        files.append(tmp_path / f"shard-{i}.json")
        files[-1].write_text(part.to_json())
    merged = trainsim.merge(files)
    assert merged.to_json() == whole.to_json()
    assert cli("sweep", "merge", *map(str, files), "--format", "json").stdout == whole.to_json()
    # a shard rerun (the same answer) counts once
    assert trainsim.merge([*files, files[0]]).to_json() == whole.to_json()
    # a shard of another sweep, though of the same topology and workload, is refused by its fingerprint
    other = tmp_path / "other.json"
    other.write_text(trainsim.sweep(H100, LLAMA8B, gpus=64, top=4, shard="1/3", fix="zero=1").to_json())
    with pytest.raises(trainsim.SpecError, match="/shard/fingerprint: differs from"):
        trainsim.merge([files[0], other, files[2]])


def test_collective_equals_the_cli():
    report = trainsim.collective(H100, "all_reduce", group="0-7", sizes="1MiB:64MiB")
    expected = cli("collective", "-t", H100, "--op", "all_reduce", "--group", "0-7", "--sweep", "1MiB:64MiB",
                   "--format", "json").stdout
    assert report.to_json() == expected
    one = trainsim.collective(H100, "all_gather", bytes=1 << 30)
    assert one.to_json() == cli("collective", "-t", H100, "--op", "all_gather", "--bytes", str(1 << 30),
                                "--format", "json").stdout


def test_goodput_equals_the_cli_and_refuses_a_plan_that_does_not_fit():
    plan = "tp=8,pp=8,dp=16,sp=on,recompute=selective"
    report = trainsim.goodput(A100, GPT3, plan, days=30, samples=200)
    expected = cli("goodput", "-t", A100, "-w", GPT3, "-s", plan, "--days", "30", "--samples", "200",
                   "--format", "json").stdout
    assert report.to_json() == expected
    with pytest.raises(trainsim.DoesNotFitError, match="allow_no_fit"):
        trainsim.goodput(A100, GPT3, "tp=1,pp=1,gpus=64", days=30, samples=10)
    priced = trainsim.goodput(A100, GPT3, "tp=1,pp=1,gpus=64", days=30, samples=10, allow_no_fit=True)
    assert priced.fits is False


def test_replay_and_calibrate_equal_the_cli(tmp_path):
    traces = [str(ROOT / "tests/reference/traces/hta" / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
    report = trainsim.replay(traces, compute_scale=2)
    expected = cli("replay", "--trace", traces[0], "--trace", traces[1], "--compute-scale", "2",
                   "--format", "json").stdout
    assert report.to_json() == expected
    out = tmp_path / "cal.json"
    cli("calibrate", "--trace", traces[0], "--trace", traces[1], "-t", A100, "-o", str(out))
    assert trainsim.calibrate(traces, topology=A100) == load(str(out))


def test_pages_and_timeline_equal_the_cli(tmp_path):
    report = trainsim.run(A100, GPT3, GPT3_PLAN)
    report.write_html(tmp_path / "py.html")
    report.write_timeline(tmp_path / "py.json")
    cli("run", "-t", A100, "-w", GPT3, "-s", GPT3_PLAN, "--html", str(tmp_path / "cli.html"),
        "--timeline", str(tmp_path / "cli.json"))
    assert (tmp_path / "py.html").read_bytes() == (tmp_path / "cli.html").read_bytes()
    assert (tmp_path / "py.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    with pytest.raises(trainsim.SpecError, match="analytic"):
        trainsim.run(A100, GPT3, GPT3_PLAN, analytic=True).write_timeline(tmp_path / "none.json")


# --- errors --------------------------------------------------------------------------------------

def cli_error(*args: str) -> str:
    done = cli(*args, expect=2)
    return "\n".join(line.removeprefix("error: ") for line in done.stderr.splitlines())


def test_spec_errors_carry_the_cli_message_source_and_pointer():
    with pytest.raises(trainsim.SpecError) as caught:
        trainsim.run(A100, GPT3, "tp=8,pp=7")
    assert str(caught.value) == cli_error("run", "-t", A100, "-w", GPT3, "-s", "tp=8,pp=7")
    assert caught.value.source == 'strategy "tp=8,pp=7"'
    assert {d[1] for d in caught.value.diagnostics} == {"/mb", "/pp"}
    assert isinstance(caught.value, ValueError)


def test_a_dict_is_named_in_errors():
    topology = load(A100)
    del topology["network"]
    with pytest.raises(trainsim.SpecError) as caught:
        trainsim.run(trainsim.Topology.from_dict(topology, name="my cluster"), GPT3, GPT3_PLAN)
    assert caught.value.source == "my cluster" and caught.value.pointer == "/network"
    with pytest.raises(trainsim.SpecError, match="^workload dict: /model"):
        trainsim.run(A100, {"name": "w"}, GPT3_PLAN)


def test_missing_file_and_bad_arguments():
    with pytest.raises(trainsim.SpecError, match="no-such.json"):
        trainsim.run(str(ROOT / "no-such.json"), GPT3, GPT3_PLAN)
    with pytest.raises(trainsim.SpecError, match="--top"):
        trainsim.sweep(H100, LLAMA8B, gpus=64, top=0)
    with pytest.raises(trainsim.SpecError, match="--top"):
        trainsim.sweep(H100, LLAMA8B, gpus=64, top=-3)
    with pytest.raises(trainsim.SpecError, match="unknown collective"):
        trainsim.collective(H100, "all_to_none", bytes="1MiB")
    with pytest.raises(ValueError):  # NaN is not JSON: refused before the C++ core sees it
        trainsim.run({"x": float("nan")}, GPT3, GPT3_PLAN)


# --- the GIL -------------------------------------------------------------------------------------

def test_the_gil_is_released_while_simulating():
    """A second Python thread keeps running while a sweep simulates: the longest pause between its
    iterations stays far below the sweep's duration (holding the GIL would make them equal)."""
    done = threading.Event()
    elapsed = {}

    def search():
        start = time.perf_counter()
        trainsim.sweep(H100, LLAMA8B, gpus=64, top=5, threads=1)
        elapsed["s"] = time.perf_counter() - start
        done.set()

    worker = threading.Thread(target=search)
    last = time.perf_counter()
    longest = 0.0
    ticks = 0
    worker.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
        ticks += 1
    worker.join()
    assert elapsed["s"] > 0.3, "the sweep is too short to tell"
    assert ticks > 1000
    assert longest < 0.5 * elapsed["s"], f"main thread stalled {longest:.3f} s of {elapsed['s']:.3f} s"


def test_version_and_typing_files():
    assert trainsim.__version__ == cli("--version").stdout.split()[-1]
    package = pathlib.Path(trainsim.__file__).parent
    assert (package / "py.typed").exists() and (package / "_core.pyi").exists()


def test_cmake_install_gives_an_importable_package(tmp_path):
    """`cmake --install` (into DESTDIR here) copies a package that imports and runs on its own."""
    env = dict(os.environ, DESTDIR=str(tmp_path))
    done = subprocess.run([os.environ["TRAINSIM_CMAKE"], "--install", os.environ["TRAINSIM_BUILD_DIR"]],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    [init] = list(tmp_path.rglob("trainsim/__init__.py"))
    code = (f"import trainsim; r = trainsim.run({A100!r}, {GPT3!r}, {GPT3_PLAN!r}, analytic=True); "
            "print(trainsim.__file__, r.params_total)")
    env = dict(os.environ, PYTHONPATH=str(init.parent.parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    path, params = done.stdout.split()
    assert path == str(init) and int(params) == 174615846912
