"""The tables of scripts/ab-bench: per-round ratios B / A of every (transport, mode, size) and
their medians. Usage: ab-bench.py OUT ROUNDS A_DIR B_DIR (reads OUT/{a,b}.N/raw.csv)."""
import csv
import os
import statistics
import sys


def read(path):
    with open(path) as f:
        return {(r["transport"], r["mode"], int(r["size"])): float(r["value"])
                for r in csv.DictReader(f) if r["value"]}


def main(out, rounds, a_dir, b_dir):
    rows = {}
    for i in range(1, rounds + 1):
        a = read(os.path.join(out, f"a.{i}", "raw.csv"))
        b = read(os.path.join(out, f"b.{i}", "raw.csv"))
        for key in sorted(a.keys() & b.keys()):
            if a[key] > 0:
                rows.setdefault(key, []).append(b[key] / a[key])
    with open(os.path.join(out, "ab.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["transport", "mode", "size", "median", "min", "max"] +
                   [f"round{i}" for i in range(1, rounds + 1)])
        for (t, m, s), r in sorted(rows.items()):
            w.writerow([t, m, s, f"{statistics.median(r):.3f}", f"{min(r):.3f}", f"{max(r):.3f}"] +
                       [f"{x:.3f}" for x in r])
    # One table per transport: sizes down, modes across (latency: B / A time, lower is better
    # for B; bw: B / A MB/s, higher is better for B).
    lines = [f"B ÷ A per round, medians of {rounds} interleaved rounds (min–max); "
             f"A `{a_dir}`, B `{b_dir}`.", ""]
    for t in sorted({k[0] for k in rows}):
        modes = sorted({k[1] for k in rows if k[0] == t})
        sizes = sorted({k[2] for k in rows if k[0] == t})
        lines += [f"**{t}**", "", "| size | " + " | ".join(modes) + " |",
                  "|---:|" + "---:|" * len(modes)]
        for s in sizes:
            cells = []
            for m in modes:
                r = rows.get((t, m, s))
                cells.append(f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})" if r else "–")
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    with open(os.path.join(out, "ab.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key in sorted({(k[0], k[1]) for k in rows}):
        sizes = sorted(s for (t, m, s) in rows if (t, m) == key)
        ax.plot(sizes, [statistics.median(rows[(*key, s)]) for s in sizes], marker="o",
                label=f"{key[0]} {key[1]}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("B ÷ A (median of rounds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ab.png"), dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
