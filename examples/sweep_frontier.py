#!/usr/bin/env python3
"""A sweep's step time against peak memory, with the Pareto frontier: Llama 3 8B on 64 H100s.

    PYTHONPATH=build/python python3 examples/sweep_frontier.py --out docs/images/sweep_frontier.png

Every plan the sweep simulated is a point (`trainsim.sweep(...).to_dict()["simulated"]`); the
frontier holds the plans that no other plan beats on both time and memory.
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")  # headless: this script writes a file
import matplotlib.pyplot as plt  # noqa: E402

import trainsim  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def frontier(plans: list[dict]) -> list[dict]:
    """The plans no other plan beats on both step time and peak memory, fastest first."""
    out: list[dict] = []
    for p in sorted(plans, key=lambda p: (p["step_time_s"], p["peak_memory_bytes"])):
        if not out or p["peak_memory_bytes"] < out[-1]["peak_memory_bytes"]:
            out.append(p)
    return out


def short(strategy: str) -> str:
    """The keys that tell plans apart on the chart (dp and the defaults left out)."""
    keep = [kv for kv in strategy.split(",") if not kv.startswith(("dp=", "schedule=", "recompute=none", "mb=1"))]
    return ",".join(keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sweep_frontier.png", help="PNG to write")
    parser.add_argument("--gpus", type=int, default=64)
    args = parser.parse_args()

    result = trainsim.sweep(ROOT / "topologies/dgx-h100-superpod.json", ROOT / "workloads/llama3-8b.json",
                            gpus=args.gpus, top=10)
    plans = result.to_dict()["simulated"]
    front = frontier(plans)
    gib = 2**30
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.scatter([p["peak_memory_bytes"] / gib for p in plans], [p["step_time_s"] for p in plans], s=12,
               color="0.6", label=f"simulated plans ({len(plans)})")
    ax.plot([p["peak_memory_bytes"] / gib for p in front], [p["step_time_s"] for p in front], "o-",
            color="tab:red", label="frontier")
    for p in front:
        ax.annotate(short(p["strategy"]), (p["peak_memory_bytes"] / gib, p["step_time_s"]), fontsize=7,
                    xytext=(5, 3), textcoords="offset points")
    ax.margins(x=0.35, y=0.1)
    ax.set_xlabel("peak memory per GPU (GiB)")
    ax.set_ylabel("step time (s)")
    ax.set_title(f"Llama 3 8B on {args.gpus} H100s: what the sweep simulated")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110, metadata={"Software": None})
    frame = result.to_pandas()
    print(frame[["rank", "strategy", "step_time_s", "peak_memory_bytes"]].head(3).to_string(index=False))
    print(f"{len(front)} plans on the frontier of {len(plans)}; wrote {args.out}")


if __name__ == "__main__":
    main()
