#!/usr/bin/env python3
"""results.png of a `diwarp mem-bench` run (scripts/mem-bench --plot): user + kernel, MPI + transport
and the Anonymous growth per rank against the rank count, one line per transport, from the
run's results.csv, runs.csv and transports.tsv. Usage: scripts/mem-bench-plot.py OUT"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = sys.argv[1]
# transport -> (MPI, diwarp run transport, diwarp's mode in words, settings), in the run's order.
info = {r[0]: r[1:] for r in csv.reader(open(os.path.join(out, "transports.tsv")), delimiter="\t")}
transports = list(info)
diwarps = [t for t in transports if info[t][1] == "diwarp"]
med = {}
for row in csv.DictReader(open(os.path.join(out, "results.csv"))):
    med[(row["transport"], int(row["ranks"]), row["metric"])] = float(row["median_mib"])
nranks = sorted({int(r["ranks"]) for r in csv.DictReader(open(os.path.join(out, "runs.csv")))})
shown = [("user_kernel1_kb", "User + kernel after traffic"),
         ("mpi_transport1_kb", "MPI + transport after traffic"),
         ("grown", "Anonymous grown by the traffic")]
fig, axes = plt.subplots(1, len(shown), figsize=(15, 4))
# diwarp thick, its modes told apart by line and marker; the peers thin and solid.
dash, mark = {"ud": "-", "rc": "--", "hybrid": "-."}, {"ud": "o", "rc": "s", "hybrid": "^"}
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for ax, (key, title) in zip(axes, shown):
    for i, t in enumerate(transports):
        xs = [n for n in nranks if (t, n, key) in med]
        m = info[t][2].split()[0].rstrip(",") if t in diwarps else None
        style = (dict(linewidth=1.2, marker="o") if m is None else
                 dict(linewidth=2.5, linestyle=dash.get(m, ":"), marker=mark.get(m, "D")))
        ax.plot(xs, [med[(t, n, key)] for n in xs], label=f"{t}: {info[t][2]}" if m else t,
                color=colors[i % len(colors)], **style)
    ax.set_xlabel("ranks")
    ax.set_ylabel("MiB per rank")
    ax.set_title(title, fontsize=10)
    if key != "grown":
        ax.set_yscale("log")
    ax.set_xticks(nranks)
    ax.grid(alpha=0.3)
handles, labels = axes[0].get_legend_handles_labels()
ncol = max(1, min(len(labels), 4))
legend_rows = -(-len(labels) // ncol)
fig.set_size_inches(15, 4 + 0.25 * (legend_rows - 1))
fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
fig.tight_layout(rect=(0, 0.07 + 0.05 * (legend_rows - 1), 1, 1))
fig.savefig(os.path.join(out, "results.png"), dpi=110)
