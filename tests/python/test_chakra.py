"""Chakra export read by an independent reader: Python's protobuf against the schema, compiled here
by protoc from src/chakra/et_def.proto (Chakra's messages and field numbers)."""

from __future__ import annotations

import importlib
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

import trainsim

from specs import A100, CLI, GPT3, ROOT
from specs import GPT3_PLAN as PLAN


@pytest.fixture(scope="module")
def et_def(tmp_path_factory):
    if shutil.which("protoc") is None:
        pytest.skip("protoc (protobuf-compiler) is not installed")
    pytest.importorskip("google.protobuf")
    out = tmp_path_factory.mktemp("proto")
    subprocess.run(["protoc", f"-I{ROOT / 'src/chakra'}", f"--python_out={out}", str(ROOT / "src/chakra/et_def.proto")],
                   check=True)
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("et_def_pb2")
    finally:
        sys.path.pop(0)


def messages(path: pathlib.Path):
    """The length-delimited messages of a file (a varint length, then the message)."""
    data = path.read_bytes()
    at = 0
    while at < len(data):
        size = shift = 0
        while True:
            byte = data[at]
            at += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        yield data[at:at + size]
        at += size


def read(et_def, path: pathlib.Path):
    parts = list(messages(path))
    meta = et_def.GlobalMetadata()
    meta.ParseFromString(parts[0])
    nodes = []
    for p in parts[1:]:
        node = et_def.Node()
        node.ParseFromString(p)
        nodes.append(node)
    return meta, nodes


def attrs(node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def test_exported_files_parse_and_hold_the_lowered_graph(et_def, tmp_path):
    out = tmp_path / "et"
    done = subprocess.run([CLI, "run", "-t", A100, "-w", GPT3, "-s", PLAN, "--chakra", str(out), "--format", "json"],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    files = sorted(out.glob("trainsim.*.et"))
    assert len(files) == report["simulation"]["simulated_ranks"] == 8
    ids, nodes, data_deps, ctrl_deps = set(), 0, 0, 0
    kinds = {}
    for f in files:
        meta, file_nodes = read(et_def, f)
        meta_attrs = {a.name: getattr(a, a.WhichOneof("value")) for a in meta.attr}
        assert meta_attrs["world_size"] == 1024 and f.name == f"trainsim.{meta_attrs['rank']}.et"
        local = {n.id for n in file_nodes}
        for n in file_nodes:
            ids.add(n.id)
            data_deps += len(n.data_deps)
            ctrl_deps += len(n.ctrl_deps)
            assert set(n.data_deps) <= local and set(n.ctrl_deps) <= local
            name = et_def.NodeType.Name(n.type)
            kinds[name] = kinds.get(name, 0) + 1
            a = attrs(n)
            if n.type == et_def.COMM_COLL_NODE:
                assert a["comm_size"] > 0 and a["pg_name"]
            if n.type == et_def.COMP_NODE and not a["is_cpu_op"] and n.name.startswith(("F", "B")):
                # matrix products carry FLOPs, norms and residual adds (no FLOPs counted) bytes
                assert a["num_ops"] > 0 or a["tensor_size"] > 0, n.name
        nodes += len(file_nodes)
    # every task of the lowered graph is a node; a transfer is a send in one file and a receive
    # in another
    assert len(ids) == report["simulation"]["tasks"]
    assert kinds["COMM_SEND_NODE"] == kinds["COMM_RECV_NODE"] > 0
    # the counts the CLI reported writing
    assert f"({nodes} nodes, {data_deps} data and {ctrl_deps} control dependencies)" in done.stderr
    groups = json.loads((out / "comm_group.json").read_text())
    assert all(len(ranks) in (8, 16, 64, 128, 1024) or len(ranks) > 1 for ranks in groups.values())


def test_export_then_replay_from_python_equals_the_cli(tmp_path):
    out = tmp_path / "et"
    report = trainsim.run(A100, GPT3, PLAN, chakra=out)
    replayed = trainsim.replay(chakra=out)
    assert replayed.step_time_s == report.step_time_s  # to the picosecond
    cli = subprocess.run([CLI, "replay", "--chakra", str(out), "-t", A100, "--compute-scale", "2", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    assert trainsim.replay(chakra=out, topology=A100, compute_scale=2).to_json() == cli
    with pytest.raises(trainsim.SpecError, match="not both"):
        trainsim.replay([str(out)], chakra=out)
