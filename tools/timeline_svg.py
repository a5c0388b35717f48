#!/usr/bin/env python3
"""Draw the compute streams of a trainsim --timeline file as an SVG Gantt chart.

    tools/timeline_svg.py TIMELINE.json OUT.svg [--stream compute]

One row per simulated rank; forward passes blue, backward green, weight gradients yellow,
recomputation grey, the optimizer red, communication (other streams, if chosen) purple.
Standard library only.
"""
import argparse
import json
import sys

COLOURS = {"F": "#4e79a7", "B": "#59a14f", "W": "#edc948", "optimizer": "#e15759", "recompute": "#9c9c9c"}


def colour(event):
    if event.get("cat") == "recompute":
        return COLOURS["recompute"]
    if event.get("cat") == "optimizer":
        return COLOURS["optimizer"]
    if event.get("cat") not in ("compute",):
        return "#b07aa1"
    return COLOURS.get(event["name"][:1], "#bab0ac")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("out")
    parser.add_argument("--stream", default="compute", help="thread name to draw (default: compute)")
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()

    with open(args.timeline) as f:
        events = json.load(f)["traceEvents"]
    threads = {(e["pid"], e["tid"]) for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"]["name"] == args.stream}
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    boxes = [e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in threads]
    if not boxes:
        sys.exit(f"{args.timeline}: no events on stream {args.stream!r}")
    ranks = sorted({e["pid"] for e in boxes})
    end = max(e["ts"] + e["dur"] for e in boxes)
    left, row, top = 150, 28, 30
    scale = (args.width - left - 20) / end
    height = top + row * len(ranks) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{args.width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="18">{args.stream} streams, {end / 1000:.1f} ms</text>']
    for i, pid in enumerate(ranks):
        y = top + i * row
        out.append(f'<text x="5" y="{y + 17}">{names.get(pid, pid)}</text>')
        for e in boxes:
            if e["pid"] != pid:
                continue
            x = left + e["ts"] * scale
            w = max(e["dur"] * scale, 0.5)
            out.append(f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{row - 6}" fill="{colour(e)}" '
                       f'stroke="white" stroke-width="0.3"><title>{e["name"]}</title></rect>')
    legend_y = top + row * len(ranks) + 20
    for j, (label, c) in enumerate([("forward", COLOURS["F"]), ("backward", COLOURS["B"]), ("weight grad", COLOURS["W"]),
                                    ("recompute", COLOURS["recompute"]), ("optimizer", COLOURS["optimizer"])]):
        x = left + j * 120
        out.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{x + 16}" y="{legend_y}">{label}</text>')
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
