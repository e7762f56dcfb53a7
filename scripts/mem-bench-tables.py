#!/usr/bin/env python3
"""diwarp mem-bench's tables (and --plot): results.md, results.csv and ledger.csv from raw.csv,
runs.csv, reports.csv and transports.tsv of the run in OUT. Usage: mem-bench-tables.py OUT CMDLINE
TRANSPORTS(comma-separated) PLOT(0|1)"""
import csv, json, os, statistics, sys
from collections import defaultdict
out, cmdline, transports, plot = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4] == "1"
SCHEMA = "diwarp-mem-report/1"
# transport -> (MPI, scripts/mpirun-diwarp transport, diwarp's mode in words, settings)
info = {r[0]: r[1:] for r in csv.reader(open(os.path.join(out, "transports.tsv")), delimiter="\t")}
diwarps = [t for t in transports if info[t][1] == "diwarp"]
raw = defaultdict(list)
for row in csv.DictReader(open(os.path.join(out, "raw.csv"))):
    raw[(row["transport"], int(row["ranks"]))].append({k: int(v) for k, v in row.items() if k != "transport"})
fails = defaultdict(list)
for row in csv.DictReader(open(os.path.join(out, "runs.csv"))):
    if row["status"] != "ok":
        fails[(row["transport"], int(row["ranks"]))].append(row["status"])
nranks = sorted({n for (_, n) in raw} | {n for (_, n) in fails})
MIB = 1024.0

# diwarp's reports: every rank's finalize line of every finished run, into ledger.csv.
ledger, accounts, scales, problems = defaultdict(list), [], {}, []
for rep in csv.DictReader(open(os.path.join(out, "reports.csv"))):
    t, n, r, path = rep["transport"], int(rep["ranks"]), rep["run"], os.path.join(out, rep["file"])
    try:
        objs = [json.loads(l) for l in open(path) if l.strip()]
    except (OSError, ValueError) as e:
        problems.append(f"{rep['file']}: unreadable ({e})")
        continue
    finals = [o for o in objs if isinstance(o, dict) and o.get("at") == "finalize"]
    if any(not isinstance(o, dict) or o.get("schema") != SCHEMA for o in objs):
        problems.append(f"{rep['file']}: not {SCHEMA} (another provider version?); skipped")
        continue
    if len(finals) != n:
        problems.append(f"{rep['file']}: {len(finals)} finalize lines for {n} ranks")
    for o in finals:
        try:
            accs = o["ledger"]["accounts"]
            peer_bytes, per_peer, peers = 0, 0.0, None
            for name, a in accs.items():
                if name not in accounts:
                    accounts.append(name)
                    scales[name] = a.get("scale")
                if a.get("scale") == "peers" and a.get("peers"):
                    # per peer: each account over the peers it covers (address_vector covers the
                    # rank too); peers: the fewest any covers, the remote peers (as scripts/mem-report).
                    peer_bytes += a["current"]
                    per_peer += a["current"] / a["peers"]
                    peers = a["peers"] if peers is None else min(peers, a["peers"])
            kernel = o.get("kernel") or {}
            paths = (o.get("counters") or {}).get("paths") or {}
            row = dict(transport=t, ranks=n, run=r, pid=o["pid"], total=o["ledger"]["total"],
                       total_peak=o["ledger"]["total_peak"], peer_bytes=peer_bytes, peers=peers or 0,
                       per_peer=round(per_peer, 1), explained=o["growth"]["explained"],
                       unexplained=o["unexplained"], provider_heap=o["heap"]["provider"],
                       kernel_held=kernel.get("held"), ep_sockets=kernel.get("sockets"),
                       rc_open=paths.get("open"), rc_open_peak=paths.get("open_peak"),
                       rc_connected=paths.get("connected"))
            for name, a in accs.items():
                row[f"{name}_current"], row[f"{name}_peak"] = a["current"], a["peak"]
        except (KeyError, TypeError) as e:
            problems.append(f"{rep['file']}: pid {o.get('pid')}: field {e} missing")
            continue
        ledger[(t, n)].append(row)
lcols = ["transport", "ranks", "run", "pid"] + [f"{a}_{k}" for a in accounts for k in ("current", "peak")] + \
    ["total", "total_peak", "peer_bytes", "peers", "per_peer", "explained", "unexplained", "provider_heap",
     "kernel_held", "ep_sockets", "rc_open", "rc_open_peak", "rc_connected"]
with open(os.path.join(out, "ledger.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, lcols, restval="")
    w.writeheader()
    for key in sorted(ledger):
        for row in ledger[key]:
            w.writerow({k: "" if v is None else v for k, v in row.items()})

def med(t, n, f):
    v = [x[f] for x in raw.get((t, n), [])]
    return statistics.median(v) / MIB if v else None

def cell(v):
    return "failed" if v is None else f"{v:.1f}"

metrics = [("anon1_kb", "Anonymous after traffic"),
           ("user_kernel1_kb", "User + kernel after traffic (Anonymous + kernel socket memory)"),
           ("mpi_transport1_kb", "MPI + transport after traffic (Anonymous + kernel socket memory - footprint's own buffers)"),
           ("grown", "Anonymous grown by the traffic"),
           ("rss1_kb", "VmRSS after traffic"),
           ("pss1_kb", "Pss after traffic (VmRSS with each shared page split among the processes that map it)"),
           ("hwm_kb", "VmHWM (peak RSS)")]
for rows in raw.values():
    for x in rows:
        x["grown"] = x["anon1_kb"] - x["anon0_kb"]
        x["user_kernel1_kb"] = x["anon1_kb"] + x["kheld1_kb"]
        x["mpi_transport1_kb"] = x["user_kernel1_kb"] - x["app_kb"]
with open(os.path.join(out, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["transport", "ranks", "metric", "median_mib", "samples"])
    for t in transports:
        for n in nranks:
            for key, _ in metrics:
                v = med(t, n, key)
                if v is not None:
                    w.writerow([t, n, key, f"{v:.2f}", len(raw[(t, n)])])
lines = [f"# Memory per rank: diwarp and its peers\n",
         f"Made with `{cmdline}`. MiB per rank, medians over every rank of every run; "
         "`failed` = no run finished (see runs.csv). Ratios: every diwarp transport (whatever its mode) ÷ every other transport under the same MPI (with none, ÷ that MPI's first diwarp transport), and every hybrid transport ÷ its MPI's rc one. "
         "Kernel socket memory (SO_MEMINFO of every socket of the rank, MPI's and the launcher's too, "
         "at the moment of the sample) is in no RSS; the user + kernel table adds it. Every Anonymous "
         "figure includes footprint's own buffers (2 MiB + 1 MiB per peer + 128 KiB per rank); the "
         "MPI + transport table takes them out.\n",
         "Transports (scripts/transports.sh; diwarp's mode: FI_DIWARP_MODE and the entry's other "
         "settings, hybrid (default) = none set): " + "; ".join(
             f"{t} = {info[t][0]} over {info[t][1]}" + (f", {info[t][2]}" if info[t][2] else "")
             for t in transports) + ".\n"]
# Ratios: every diwarp transport (any mode) to every other transport under the same MPI; under an
# MPI with no other transport, each of its diwarp transports to its first.
ratio_cols = []
for d in diwarps:
    mine = [t for t in diwarps if info[t][0] == info[d][0]]
    others = [p for p in transports if info[p][1] != "diwarp" and info[p][0] == info[d][0]]
    ratio_cols += [(d, p) for p in others] if others else ([(d, mine[0])] if d != mine[0] else [])
# Seed 000's comparison: every hybrid transport to its MPI's rc transport.
for d in diwarps:
    rcs = [t for t in diwarps if info[t][0] == info[d][0] and info[t][2] == "rc"]
    if info[d][2].startswith("hybrid") and rcs and (d, rcs[0]) not in ratio_cols:
        ratio_cols.append((d, rcs[0]))
for key, title in metrics:
    lines.append(f"\n## {title} (MiB)\n")
    lines.append("| ranks | " + " | ".join(transports) + "".join(f" | {d} ÷ {p}" for d, p in ratio_cols) + " |")
    lines.append("|---:|" + "---:|" * (len(transports) + len(ratio_cols)))
    for n in nranks:
        vals = [med(t, n, key) for t in transports]
        ratios = []
        for d, p in ratio_cols:
            a, b = med(d, n, key), med(p, n, key)
            ratios.append(f"{a / b:.2f}" if a is not None and b is not None and b > 0 and a >= 0 else "–")
        lines.append(f"| {n} | " + " | ".join(cell(v) for v in vals) + "".join(f" | {x}" for x in ratios) + " |")

def medraw(t, n, f):
    v = [x[f] for x in raw.get((t, n), [])]
    return statistics.median(v) if v else None

def lmed(t, n, k):
    v = [row[k] for row in ledger.get((t, n), []) if row.get(k) is not None]
    return statistics.median(v) if v else None

lines.append("\n## Sockets per rank after traffic, and the kernel memory they hold (KiB, after MPI_Init → after traffic)\n")
lines.append("Sockets: all of the rank's (footprint, after the traffic: the MPI's and the launcher's "
             "too). For diwarp, from its report at finalize: ep = the endpoint's own (its UDP "
             "socket and the peers' connected ones, and in rc and hybrid mode the listener and "
             "every RC connection open then), RC = the RC connections open at once at most "
             "(one TCP socket each).\n")
lines.append("| ranks | " + " | ".join(transports) + " |")
lines.append("|---:|" + "---:|" * len(transports))
for n in nranks:
    cells = []
    for t in transports:
        s, k0, k1 = medraw(t, n, "sock1"), medraw(t, n, "kheld0_kb"), medraw(t, n, "kheld1_kb")
        c = "failed" if s is None else f"{s:g} sockets, {k0:g} → {k1:g} KiB"
        if s is not None and t in diwarps:
            ep, rc = lmed(t, n, "ep_sockets"), lmed(t, n, "rc_open_peak")
            c += " (ep " + ("–" if ep is None else f"{ep:g}") + ", RC " + ("–" if rc is None else f"{rc:g}") + ")"
        cells.append(c)
    lines.append(f"| {n} | " + " | ".join(cells) + " |")

if ledger:
    keys = sorted(ledger, key=lambda k: (transports.index(k[0]) if k[0] in transports else 99, k[1]))
    lines.append("\n## diwarp's ledger at finalize (FI_DIWARP_MEM_REPORT; KiB per rank, medians over ranks and runs)\n")
    lines.append("Accounts: their peaks. Explained: the share of the provider heap's growth since endpoint "
                 "enable that the ledger explains. Per peer: each account of scale `peers` over the peers it covers.\n")
    lines.append("| | " + " | ".join(f"{t} np{n}" for t, n in keys) + " |")
    lines.append("|---|" + "---:|" * len(keys))
    lines.append("| diwarp's mode | " + " | ".join(info[t][2] for t, n in keys) + " |")

    def kib(v):
        return "–" if v is None else f"{v / 1024:.1f}"
    for a in accounts:
        lines.append(f"| {a} ({scales[a]}), peak | " + " | ".join(kib(lmed(t, n, f"{a}_peak")) for t, n in keys) + " |")
    lines.append("| **total at finalize** | " + " | ".join(kib(lmed(t, n, "total")) for t, n in keys) + " |")
    lines.append("| total's peak | " + " | ".join(kib(lmed(t, n, "total_peak")) for t, n in keys) + " |")
    lines.append("| provider heap | " + " | ".join(kib(lmed(t, n, "provider_heap")) for t, n in keys) + " |")
    lines.append("| heap growth explained | " + " | ".join(
        "–" if lmed(t, n, "explained") is None else f"{100 * lmed(t, n, 'explained'):.1f}%" for t, n in keys) + " |")
    lines.append("| unexplained | " + " | ".join(kib(lmed(t, n, "unexplained")) for t, n in keys) + " |")
    lines.append("| kernel held (endpoint's sockets) | " + " | ".join(kib(lmed(t, n, "kernel_held")) for t, n in keys) + " |")
    lines.append("| RC connections: most open at once / open at finalize | " + " | ".join(
        "–" if lmed(t, n, "rc_open_peak") is None else f"{lmed(t, n, 'rc_open_peak'):g} / {lmed(t, n, 'rc_open'):g}"
        for t, n in keys) + " |")
    lines.append("| per peer (bytes) × peers | " + " | ".join(
        f"{lmed(t, n, 'per_peer'):.0f} × {lmed(t, n, 'peers'):g}" for t, n in keys) + " |")
    first = ledger[keys[-1]][0]
    lines.append(f"\nProjected to more ranks: `scripts/mem-report {out}/logs/{first['transport']}.np{first['ranks']}"
                 f".{first['run']}.mem.jsonl "
                 f"--peers {out} --png projection.png` (reports of the other runs beside it).")
for why in problems:
    lines.append(f"\n- report: {why}")
for (t, n), why in sorted(fails.items()):
    lines.append(f"\n- {t} on {n} ranks: {len(why)} run(s) did not finish: {why[0]}")
open(os.path.join(out, "results.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
if plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [metrics[1], metrics[2], metrics[3]]
    fig, axes = plt.subplots(1, len(shown), figsize=(15, 4))
    # diwarp thick, its modes told apart by line and marker; the peers thin and solid.
    dash, mark = {"ud": "-", "rc": "--", "hybrid": "-."}, {"ud": "o", "rc": "s", "hybrid": "^"}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes, shown):
        for i, t in enumerate(transports):
            xs = [n for n in nranks if med(t, n, key) is not None]
            m = info[t][2].split()[0].rstrip(",") if t in diwarps else None
            style = (dict(linewidth=1.2, marker="o") if m is None else
                     dict(linewidth=2.5, linestyle=dash.get(m, ":"), marker=mark.get(m, "D")))
            ax.plot(xs, [med(t, n, key) for n in xs], label=f"{t}: {info[t][2]}" if m else t,
                    color=colors[i % len(colors)], **style)
        ax.set_xlabel("ranks")
        ax.set_ylabel("MiB per rank")
        ax.set_title(title.split(" (")[0], fontsize=10)
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
