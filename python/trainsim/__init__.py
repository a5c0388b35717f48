"""trainsim from Python: the CLI's commands as functions, their reports as objects.

Every function calls the same C++ code the ``trainsim`` command runs (docs/python.md), so a
report's ``to_dict()`` equals ``json.loads`` of the CLI's ``--format json`` output for the same
inputs, and ``to_json()`` is that output byte for byte. The GIL is released while simulating.

    >>> import trainsim
    >>> r = trainsim.run("topologies/dgx-h100-superpod.json", "workloads/llama3-70b.json",
    ...                  "tp=8,pp=4,dp=16,sp=on,recompute=selective")
    >>> r.step_time_s, r.fits
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Sequence, Union

from . import _core
from ._errors import DoesNotFitError, SpecError

__all__ = [
    "Topology", "Workload", "Strategy", "RunReport", "SweepResult", "CollectiveReport", "GoodputReport",
    "ReplayReport", "SpecError", "DoesNotFitError", "run", "sweep", "merge", "collective", "goodput", "replay",
    "calibrate", "__version__",
]

__version__: str = _core.version

PathLike = Union[str, "os.PathLike[str]"]


class _Spec:
    """A spec given as a file or as a dict; what the C++ core is handed."""

    _kind = "spec"

    def __init__(self, source: PathLike | Mapping[str, Any], *, name: str | None = None):
        if isinstance(source, Mapping):
            self.path: str | None = None
            self.data: dict[str, Any] | None = dict(source)
            self.label = name or f"{self._kind} dict"
        else:
            self.path = os.fspath(source)
            self.data = None
            self.label = self.path

    @classmethod
    def from_file(cls, path: PathLike):
        """The spec in a JSON file (as ``-t``/``-w``/``-s`` take it)."""
        return cls(path)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str | None = None):
        """The spec as a dict with the file's keys; errors name it ``name`` (default "<kind> dict")."""
        return cls(data, name=name)

    def _arg(self) -> Any:
        if self.data is None:
            return self.path
        return (json.dumps(self.data, allow_nan=False), self.label)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"


class Topology(_Spec):
    """A cluster: devices, node fabric and network (docs/cli.md "Topology")."""

    _kind = "topology"


class Workload(_Spec):
    """A model and its training settings: a workload file, a Hugging Face ``config.json`` or a dict."""

    _kind = "workload"

    @classmethod
    def from_hf_config(cls, path: PathLike, *, name: str | None = None) -> "Workload":
        """A Hugging Face ``config.json``; give ``seq_len`` and ``global_batch`` to ``run``/``sweep``."""
        return cls(path, name=name)


class Strategy(_Spec):
    """How the job is parallelised: a strategy file, a dict, the CLI's inline list or a launch line."""

    _kind = "strategy"

    def __init__(self, source: PathLike | Mapping[str, Any], *, name: str | None = None):
        super().__init__(source, name=name)

    @classmethod
    def parse(cls, text: str) -> "Strategy":
        """The CLI's inline list, ``"tp=8,pp=4,sp=on"``, or ``"megatron:ARGS"`` (Megatron-LM arguments)."""
        return cls(text)

    @classmethod
    def from_megatron(cls, arguments: str) -> "Strategy":
        """Megatron-LM's ``pretrain_gpt.py`` arguments, as ``-s megatron:"ARGS"`` takes them."""
        return cls("megatron:" + arguments)


SpecArg = Union[PathLike, Mapping[str, Any], _Spec, None]


def _spec(value: SpecArg, kind: type[_Spec]) -> Any:
    if value is None:
        return None
    if isinstance(value, _Spec):
        return value._arg()
    if isinstance(value, Mapping):
        return kind(value)._arg()
    return os.fspath(value)


def _path(value: PathLike | None) -> str | None:
    return None if value is None else os.fspath(value)


def _keys(value: str | Mapping[str, Any] | None) -> str | None:
    """Strategy keys as the CLI's inline list (``fix``): a str as given, a dict joined."""
    if value is None or isinstance(value, str):
        return value
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "on" if v else "off"
        return str(v)
    return ",".join(f"{k}={text(v)}" for k, v in value.items())


class _Report:
    """A report: the CLI's JSON as attributes, ``to_dict()``, ``to_json()`` and ``table()``."""

    def __init__(self, handle: Any = None, text: str | None = None):
        self._handle = handle
        self._json_text = text
        self._dict: dict[str, Any] | None = None

    def to_json(self) -> str:
        """The CLI's ``--format json`` output, byte for byte."""
        if self._json_text is None:
            self._json_text = self._handle.text("json")
        return self._json_text

    def to_dict(self) -> dict[str, Any]:
        """The report as the CLI's JSON (a fresh copy each call)."""
        return json.loads(self.to_json())

    def table(self) -> str:
        """The CLI's table output."""
        return self._handle.text("table")

    def _data(self) -> dict[str, Any]:
        if self._dict is None:
            self._dict = self.to_dict()
        return self._dict

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        data = self._data()
        if key in data:
            return data[key]
        raise AttributeError(f"{type(self).__name__} has no field {key!r}; fields: {', '.join(data)}")

    def __dir__(self) -> Iterable[str]:
        return sorted(set(super().__dir__()) | set(self._data()))

    def write_html(self, path: PathLike) -> None:
        """A self-contained HTML page of the report (as ``--html PATH``)."""
        self._handle.write_html(os.fspath(path))


class RunReport(_Report):
    """One simulated step (``trainsim run``): step time, throughput, MFU, memory, breakdown."""

    @property
    def fits(self) -> bool:
        """Whether the peak memory fits the device (the CLI exits 1 when not)."""
        return bool(self._data()["fits"])

    @property
    def step_time_s(self) -> float:
        return float(self._data()["step_time_s"])

    @property
    def tokens_per_s(self) -> float:
        return float(self._data()["tokens_per_s"])

    @property
    def mfu(self) -> float:
        return float(self._data()["mfu"])

    @property
    def peak_memory_bytes(self) -> int:
        return int(self._data()["peak_memory_bytes"])

    @property
    def warnings(self) -> list[str]:
        return list(self._data()["warnings"])

    def write_timeline(self, path: PathLike) -> None:
        """The simulated step as Chrome/Perfetto trace events (as ``--timeline PATH``)."""
        self._handle.write_timeline(os.fspath(path))


class SweepResult(_Report):
    """The best plans of a strategy search (``trainsim sweep``), ranked."""

    @property
    def plans(self) -> list[dict[str, Any]]:
        """The ranked plans (the JSON's ``top``): strategy, step time, memory, ..."""
        return list(self._data()["top"])

    def to_pandas(self):
        """The ranked plans as a pandas DataFrame, one row per plan (needs pandas)."""
        import pandas  # python3-pandas; imported here so the rest works without it

        return pandas.DataFrame(self.plans)


class CollectiveReport(_Report):
    """The cost of one collective at one or more sizes (``trainsim collective``)."""


class GoodputReport(_Report):
    """Training time under failures, checkpoints and restarts (``trainsim goodput``)."""


class ReplayReport(_Report):
    """Recorded traces run back through the engine (``trainsim replay``)."""


def _training(seq_len: int | None, global_batch: int | None, dtype: str | None, optimizer: str | None) -> dict:
    return {"seq_len": seq_len, "global_batch": global_batch, "dtype": dtype, "optimizer": optimizer}


def run(topology: SpecArg, workload: SpecArg = None, strategy: SpecArg = None, *,
        seq_len: int | None = None, global_batch: int | None = None, dtype: str | None = None,
        optimizer: str | None = None, megatron_args: PathLike | None = None, torchtitan: PathLike | None = None,
        calibration: PathLike | None = None, perturb: PathLike | None = None, steps: int = 1,
        memory_headroom: float = 0.05, full: bool = False, analytic: bool = False,
        chakra: PathLike | None = None) -> RunReport:
    """Simulate one training step, as ``trainsim run``.

    ``topology``, ``workload`` and ``strategy`` are paths, dicts or Topology/Workload/Strategy;
    the strategy also the CLI's ``"tp=8,pp=4"`` or ``"megatron:ARGS"``. A plan that does not fit
    is reported (``fits`` is False), not raised. ``chakra`` writes the simulated step as Chakra
    execution traces into that folder (as ``--chakra DIR``). Raises SpecError for bad input.
    """
    request = {"topology": _spec(topology, Topology), "workload": _spec(workload, Workload),
               "strategy": _spec(strategy, Strategy), "megatron_args": _path(megatron_args),
               "torchtitan": _path(torchtitan), "calibration": _path(calibration), "perturb": _path(perturb),
               "steps": steps, "memory_headroom": memory_headroom, "full": full, "analytic": analytic,
               "chakra": _path(chakra), **_training(seq_len, global_batch, dtype, optimizer)}
    return RunReport(_core.run(request))


def sweep(topology: SpecArg, workload: SpecArg, *, gpus: int | Sequence[int] | None = None, top: int = 10,
          fix: str | Mapping[str, Any] | None = None, rank_by: str = "step_time", threads: int = 0,
          shard: str | None = None, calibration: PathLike | None = None, memory_headroom: float = 0.05,
          exhaustive: bool = False, seq_len: int | None = None, global_batch: int | None = None,
          dtype: str | None = None, optimizer: str | None = None) -> SweepResult:
    """Search every strategy and rank the plans that fit, as ``trainsim sweep``.

    ``gpus`` is one device count or several; ``fix`` pins strategy keys (``"tp=8"`` or
    ``{"tp": 8}``); ``shard`` is ``"I/N"``. The result does not depend on ``threads``.
    """
    # what the C++ core takes as unsigned is checked here, with the CLI's messages
    if top < 1:
        raise SpecError("--top: must be at least 1", "--top", [("--top", "", "must be at least 1")])
    if threads < 0:
        raise SpecError("--threads: must be 0 (every core) or more", "--threads")
    counts = [gpus] if isinstance(gpus, int) else list(gpus or [])
    request = {"topology": _spec(topology, Topology), "workload": _spec(workload, Workload), "gpus": counts,
               "top": top, "fix": _keys(fix), "rank_by": rank_by, "threads": threads, "shard": shard,
               "calibration": _path(calibration), "memory_headroom": memory_headroom, "exhaustive": exhaustive,
               **_training(seq_len, global_batch, dtype, optimizer)}
    return SweepResult(_core.sweep(request))


def merge(files: Sequence[PathLike]) -> SweepResult:
    """The shards of one sweep (``sweep(..., shard="I/N")`` saved with ``to_json()``) joined."""
    return SweepResult(_core.merge([os.fspath(f) for f in files]))


def collective(topology: SpecArg, op: str, *, bytes: str | int | None = None, sizes: str | None = None,
               group: str = "all", algorithm: str = "auto", strategy: str | None = None,
               calibration: PathLike | None = None) -> CollectiveReport:
    """The cost of one collective, as ``trainsim collective``: ``bytes`` one size ("1GiB" or an
    int), or ``sizes`` a doubling range "MIN:MAX"."""
    request = {"topology": _spec(topology, Topology), "op": op, "bytes": None if bytes is None else str(bytes),
               "sweep": sizes, "group": group, "algorithm": algorithm, "strategy": strategy,
               "calibration": _path(calibration)}
    return CollectiveReport(text=_core.collective(request))


def goodput(topology: SpecArg, workload: SpecArg, strategy: SpecArg, *, reliability: PathLike | None = None,
            tokens: float | None = None, days: float | None = None, checkpoint_interval: str | None = None,
            seed: int = 1, samples: int = 1000, allow_no_fit: bool = False, seq_len: int | None = None,
            global_batch: int | None = None, dtype: str | None = None,
            optimizer: str | None = None) -> GoodputReport:
    """Training time under failures, as ``trainsim goodput``. A plan that does not fit raises
    DoesNotFitError unless ``allow_no_fit`` (the CLI exits 1)."""
    request = {"topology": _spec(topology, Topology), "workload": _spec(workload, Workload),
               "strategy": _spec(strategy, Strategy), "reliability": _path(reliability), "tokens": tokens,
               "days": days, "checkpoint_interval": checkpoint_interval, "seed": seed, "samples": samples,
               **_training(seq_len, global_batch, dtype, optimizer)}
    handle = _core.goodput(request)
    report = GoodputReport(handle)
    if not handle.fits and not allow_no_fit:
        raise DoesNotFitError("the plan does not fit the device's memory; goodput prices only plans that fit "
                              "(allow_no_fit=True prices it anyway)")
    return report


def replay(traces: PathLike | Sequence[PathLike] | None = None, *, chakra: PathLike | None = None,
           topology: PathLike | None = None, calibration: PathLike | None = None, compute_scale: float = 1,
           network_scale: float = 1, cost_compute: bool = False) -> ReplayReport:
    """Recorded traces run back through the engine, as ``trainsim replay``: Kineto trace files
    (``--trace``), or a folder of Chakra execution traces (``chakra``, as ``--chakra DIR``;
    ``cost_compute`` costs their kernels on the topology's device, ``--cost-compute``)."""
    if chakra is not None:
        if traces is not None:
            raise SpecError("give traces (Kineto) or chakra (a folder of Chakra traces), not both", "replay")
        request = {"chakra": os.fspath(chakra), "topology": _path(topology), "calibration": _path(calibration),
                   "compute_scale": compute_scale, "network_scale": network_scale, "cost_compute": cost_compute}
        return ReplayReport(_core.replay_chakra(request))
    if traces is None:
        raise SpecError("replay needs traces (Kineto files) or chakra (a folder of Chakra traces)", "replay")
    paths = [os.fspath(traces)] if isinstance(traces, (str, os.PathLike)) else [os.fspath(t) for t in traces]
    request = {"traces": paths, "topology": _path(topology), "calibration": _path(calibration),
               "compute_scale": compute_scale, "network_scale": network_scale}
    return ReplayReport(_core.replay(request))


def calibrate(traces: PathLike | Sequence[PathLike], *, topology: PathLike | None = None) -> dict[str, Any]:
    """Collective and kernel parameters fitted to traces: the JSON ``trainsim calibrate -o`` writes."""
    paths = [os.fspath(traces)] if isinstance(traces, (str, os.PathLike)) else [os.fspath(t) for t in traces]
    return json.loads(_core.calibrate(paths, _path(topology) or ""))
