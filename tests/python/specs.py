"""The checkout, the CLI binary and the shipped specs the Python tests use (ctest sets the two
environment variables: tests/CMakeLists.txt, test `python_api`)."""

import os
import pathlib

ROOT = pathlib.Path(os.environ["TRAINSIM_SOURCE_DIR"])
CLI = os.environ["TRAINSIM_CLI"]

A100 = str(ROOT / "topologies/dgx-a100-superpod.json")
H100 = str(ROOT / "topologies/dgx-h100-superpod.json")
GPT3 = str(ROOT / "workloads/gpt3-175b.json")
LLAMA8B = str(ROOT / "workloads/llama3-8b.json")
# the README's first command: GPT-3 175B on 1,024 A100s
GPT3_PLAN = "tp=8,pp=8,dp=16,sp=on,recompute=selective,schedule=interleaved,vpp=3"
