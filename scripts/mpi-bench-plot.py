"""results.png of a `diwarp bench` output directory: latency and bandwidth against message size,
one line per transport (medians of results.csv), diwarp's transports thick and told apart by
mode (transports.tsv). Run by `diwarp bench --plot` with the checkout venv's python:
  .venv/bin/python scripts/mpi-bench-plot.py OUT_DIR"""
import csv, os, sys
from collections import defaultdict
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

WHERE_SHORT = "two hosts (network namespaces)" if os.environ.get("MPIRUN_DIWARP_NETNS") else "loopback"
out = sys.argv[1]
info = {r[0]: r[1:] for r in csv.reader(open(os.path.join(out, "transports.tsv")), delimiter="\t")}
data = defaultdict(lambda: defaultdict(dict))   # mode -> transport -> size -> median
order = []
for row in csv.DictReader(open(os.path.join(out, "results.csv"))):
    t = row["transport"]
    if t not in order:
        order.append(t)
    data[row["mode"]][t][int(row["size"])] = float(row["median"])
modes = [m for m in ("latency", "bw", "bibw") if m in data]
# diwarp thick, its modes told apart by line and marker; the peers thin and solid.
DASH = {"ud": "-", "rc": "--", "hybrid": "-."}
MARK = {"ud": "o", "rc": "s", "hybrid": "^"}
COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
def dmode(t):
    return info[t][2].split()[0].rstrip(",") if t in info and info[t][1] == "diwarp" else None
def style(i, t):
    m = dmode(t)
    if m is None:
        return dict(color=COLORS[i % len(COLORS)], linewidth=1.2, marker="o", markersize=3)
    return dict(color=COLORS[i % len(COLORS)], linewidth=2.5, linestyle=DASH.get(m, ":"),
                marker=MARK.get(m, "D"), markersize=4)
def label(t):
    return f"{t}: {info[t][2]}" if dmode(t) else t
if not modes:
    sys.exit("no results to plot")
fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False)
ylabels = {"latency": "one-way latency (us)", "bw": "bandwidth (MB/s)", "bibw": "bi-dir. bandwidth (MB/s)"}
for ax, m in zip(axes[0], modes):
    for i, t in enumerate(order):
        pts = sorted((s, v) for s, v in data[m][t].items() if s > 0 and v > 0)
        if pts:
            ax.plot([s for s, _ in pts], [v for _, v in pts], label=label(t), **style(i, t))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabels[m])
    ax.set_title(m)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(f"MPI pt2pt, 2 ranks, {WHERE_SHORT} (medians)")
fig.tight_layout()
fig.savefig(os.path.join(out, "results.png"), dpi=110)
print(f"wrote {os.path.join(out, 'results.png')}")
