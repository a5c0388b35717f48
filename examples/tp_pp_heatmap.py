#!/usr/bin/env python3
"""Step time of Llama 3 70B on 512 H100s for every TP × PP degree, as a heat map.

    PYTHONPATH=build/python python3 examples/tp_pp_heatmap.py --out docs/images/tp_pp_heatmap.png

Each cell is one simulated step (`trainsim.run`); plans that do not fit in 80 GB are marked.
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")  # headless: this script writes a file
import matplotlib.pyplot as plt  # noqa: E402

import trainsim  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
TP = [1, 2, 4, 8]
PP = [1, 2, 4, 8, 16]


def step_times(gpus: int) -> dict[tuple[int, int], trainsim.RunReport]:
    topology = trainsim.Topology.from_file(ROOT / "topologies/dgx-h100-superpod.json")
    workload = trainsim.Workload.from_file(ROOT / "workloads/llama3-70b.json")
    reports = {}
    for tp in TP:
        for pp in PP:
            sp = ",sp=on" if tp > 1 else ""
            strategy = f"tp={tp},pp={pp},gpus={gpus}{sp},recompute=selective,zero=1"
            reports[tp, pp] = trainsim.run(topology, workload, strategy)
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tp_pp_heatmap.png", help="PNG to write")
    parser.add_argument("--gpus", type=int, default=512)
    args = parser.parse_args()

    reports = step_times(args.gpus)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    grid = [[reports[tp, pp].step_time_s if reports[tp, pp].fits else float("nan") for pp in PP] for tp in TP]
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    for i, tp in enumerate(TP):
        for j, pp in enumerate(PP):
            r = reports[tp, pp]
            label = f"{r.step_time_s:.2f} s" if r.fits else f"OOM\n{r.peak_memory_bytes / 2**30:.0f} GiB"
            ax.text(j, i, label, ha="center", va="center", fontsize=8, color="white" if r.fits else "black")
    ax.set_xticks(range(len(PP)), [str(p) for p in PP])
    ax.set_yticks(range(len(TP)), [str(t) for t in TP])
    ax.set_xlabel("pipeline-parallel degree (pp)")
    ax.set_ylabel("tensor-parallel degree (tp)")
    ax.set_title(f"Llama 3 70B on {args.gpus} H100s: simulated step time\n(selective recomputation, ZeRO-1)",
                 fontsize=10)
    fig.colorbar(image, ax=ax, label="step time (s)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110, metadata={"Software": None})
    best = min((r for r in reports.values() if r.fits), key=lambda r: r.step_time_s)
    print(f"best: tp={best.strategy['tp']}, pp={best.strategy['pp']}: {best.step_time_s:.2f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
