"""results.png of a scripts/sockets-bench run: ping-pong latency per size and stream
throughput, one line or bar per variant (medians).  Usage: sockets-bench-plot.py OUT_DIR"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = sys.argv[1]
med = defaultdict(dict)  # (bench, variant) -> size -> median
order = []
for row in csv.DictReader(open(os.path.join(out, "results.csv"))):
    key = (row["bench"], row["variant"])
    if key not in order:
        order.append(key)
    med[key][int(row["size"])] = float(row["median"])
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
style = {"tcp": "-", "udp": "--"}
for bench, v in order:
    if bench != "pingpong":
        continue
    pts = sorted(med[(bench, v)].items())
    a.plot([max(s, 1) for s, _ in pts], [x for _, x in pts], marker="o",
           linestyle=style[v.split("-")[0]], linewidth=2.5 if "iwarp" in v else 1.2, label=v)
a.set_xscale("log", base=2)
a.set_xlabel("message size (bytes)")
a.set_ylabel("one-way latency (us)")
a.set_title("ping-pong")
a.grid(True, which="both", alpha=0.3)
a.legend(fontsize=8)
bars = [(v, list(med[(bench, v)].values())[0]) for bench, v in order if bench in ("stream", "iperf3")]
b.bar(range(len(bars)), [x for _, x in bars], color=["C%d" % i for i in range(len(bars))])
b.set_xticks(range(len(bars)))
b.set_xticklabels([v for v, _ in bars], rotation=30, ha="right", fontsize=8)
b.set_ylabel("MB/s")
b.set_title("stream (64 KiB writes) and iperf3")
b.grid(True, axis="y", alpha=0.3)
fig.suptitle("libdiwarp-sockets.so, loopback (medians)")
fig.tight_layout()
fig.savefig(os.path.join(out, "results.png"), dpi=110)
print(f"wrote {os.path.join(out, 'results.png')}")
