"""NAS Parallel Benchmarks over diwarp and its peers, side by side in one run.

The NPB binaries are yours: build NPB 3.4 MPI with the MPI you want to run (see
npb-runs/README.md) and pass their directory. Every (kernel, transport) runs --runs times,
interleaved (run 1 of everything, then run 2, ...) through scripts/mpirun-diwarp, under a timeout
that kills every rank. A run is ok when NPB prints "Verification = SUCCESSFUL"; a timeout is a
hang; anything else is a failure, with its log kept. The report gives NPB's own "Time in seconds"
(median of the ok runs) and diwarp's ratio to every peer.
"""

import argparse
import csv
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
WRAPPER = HERE / "scripts" / "mpirun-diwarp"
TRANSPORTS_SH = HERE / "scripts" / "transports.sh"

# CG, IS and MG class A on 2 and 4 ranks and class B on 2: small enough for 2 cores.
DEFAULT_KERNELS = "cg.A.2,is.A.2,mg.A.2,cg.A.4,is.A.4,mg.A.4,cg.B.2,is.B.2,mg.B.2"
# scripts/mpirun-diwarp transport names, per MPI; diwarp first.
DEFAULT_TRANSPORTS = {
    "openmpi": "diwarp,ompi-tcp,tcp,udp-rxd",
    "mpich": "diwarp,tcp,tcp-rxm,udp-rxd",
}
LABELS = {
    ("openmpi", "diwarp"): "ompi-diwarp",
    ("openmpi", "ompi-tcp"): "ompi-btl-tcp",
    ("openmpi", "tcp"): "ompi-mtl-ofi-tcp",
    ("openmpi", "tcp-rxm"): "ompi-mtl-ofi-tcp",
    ("openmpi", "udp-rxd"): "ompi-udp-rxd",
    ("mpich", "diwarp"): "mpich-diwarp",
    ("mpich", "tcp"): "mpich-tcp",
    ("mpich", "tcp-rxm"): "mpich-tcp-rxm",
    ("mpich", "udp-rxd"): "mpich-udp-rxd",
}
# The table's names are "mpich-..." and "ompi-...": a short name "diwarp-rc" under an MPI is
# its prefix + "-" + the name.
PREFIX = {"mpich": "mpich", "openmpi": "ompi"}



def progress(k, n, started):
    """"[ k/N ~M:SS left]", as scripts/transports.sh's progress prints it for the shell harnesses."""
    left = int((time.monotonic() - started) * (n - k) / k) if k else 0
    return f"[{k:{len(str(n))}}/{n} ~{left // 60}:{left % 60:02} left]"

def _bash(*words):
    """Output of a function of scripts/transports.sh (the one place that knows how each
    transport is launched), as lines."""
    r = subprocess.run(["bash", "-c", 'source "$0" && "$@"', str(TRANSPORTS_SH), *words],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"npb-runs: scripts/transports.sh {' '.join(words)}: {r.stderr.strip()}")
    return r.stdout.splitlines()


_TABLE = None


def table():
    """scripts/transports.sh's table: name -> dict(mpi, wrapper, mode, settings)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = {}
        for line in _bash("transport_table"):
            name, mpi, wrapper, mode, settings = (line.split("\t") + [""] * 5)[:5]
            _TABLE[name] = dict(mpi=mpi, wrapper=wrapper, mode=mode, settings=settings)
    return _TABLE


def resolve(mpi, name):
    """The table's name of transport `name` under `mpi`, or None: a scripts/mpirun-diwarp name
    (diwarp, tcp, ... through LABELS), a table name of that MPI (mpich-diwarp-rc), or a table
    name without the MPI's prefix (diwarp-rc, diwarp-hybrid4)."""
    for cand in (LABELS.get((mpi, name)), name, f"{PREFIX.get(mpi)}-{name}"):
        if cand and table().get(cand, {}).get("mpi") == mpi:
            return cand
    return None


def is_diwarp(label):
    return table().get(label, {}).get("wrapper") == "diwarp"


def launch_command(label):
    """scripts/mpirun-diwarp with the MPI, transport and diwarp settings of table entry `label`
    (transports.sh's transport_cmd); the caller appends -n, --timeout, ..., --, the program."""
    return _bash("transport_cmd", label)


# Seconds before a run counts as hung, by class (class A runs take under a second here).
TIMEOUTS = {"S": 60, "W": 60, "A": 60, "B": 180, "C": 900}

TIME_RE = re.compile(r"Time in seconds\s*=\s*([0-9.]+)")
MOPS_RE = re.compile(r"Mop/s total\s*=\s*([0-9.]+)")
VERIFY_RE = re.compile(r"Verification\s*=\s*(\S+)")


def parse_args():
    p = argparse.ArgumentParser(
        prog="npb-runs/run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--npb", required=True, type=Path,
                   help="directory holding NPB binaries named kernel.CLASS.x (NPB's bin/)")
    p.add_argument("--kernels", default=DEFAULT_KERNELS,
                   help="kernel.CLASS.RANKS list (default: %(default)s); missing binaries are "
                        "skipped with a note")
    p.add_argument("--mpi", choices=["auto", "openmpi", "mpich"], default="auto",
                   help="the MPI the binaries were built with (auto: from the libmpi they link)")
    p.add_argument("--transports",
                   help="scripts/mpirun-diwarp transports (default: openmpi "
                        f"{DEFAULT_TRANSPORTS['openmpi']}; mpich {DEFAULT_TRANSPORTS['mpich']}), "
                        "or names of scripts/transports.sh for the MPI, with or without its "
                        "prefix: diwarp-rc, diwarp-hybrid, mpich-diwarp-hybrid4 (diwarp's modes, "
                        "FI_DIWARP_MODE / FI_DIWARP_RC_MAX); reported by the table's names")
    p.add_argument("--runs", type=int, default=3, help="runs of every pair (default 3)")
    p.add_argument("--timeout", type=int,
                   help="seconds before a run is a hang (default by class: "
                        + ", ".join(f"{c} {s}" for c, s in TIMEOUTS.items()) + ")")
    p.add_argument("--out", type=Path, help="default <target>/npb-runs/<date-time>")
    p.add_argument("--plot", action="store_true", help="also results.png")
    p.add_argument("--provider-dir", help="libdiwarp-fi.so's directory (default: built)")
    a = p.parse_args()
    if a.runs < 1:
        p.error("--runs wants a positive number")
    if not a.npb.is_dir():
        p.error(f"--npb {a.npb}: not a directory")
    a.npb = a.npb.resolve()
    if a.provider_dir:
        a.provider_dir = str(Path(a.provider_dir).resolve())
    return a


def detect_mpi(binary):
    """openmpi or mpich, from the libmpi the binary links."""
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    # Open MPI 4 and 5 ship libmpi.so.40; MPICH (and the PyPI wheel) libmpi.so.12.
    for soname in re.findall(r"libmpi\S*\.so\.(\d+)", out):
        return "openmpi" if soname == "40" else "mpich"
    return None


def parse_kernels(spec, npb):
    kernels, missing = [], []
    for item in spec.split(","):
        m = re.fullmatch(r"([a-z]{2})\.([SWABCDE])\.([0-9]+)", item.strip())
        if not m:
            sys.exit(f"npb-runs: '{item}' is not kernel.CLASS.RANKS (like mg.A.4)")
        k, c, n = m.group(1), m.group(2), int(m.group(3))
        binary = npb / f"{k}.{c}.x"
        (kernels if binary.is_file() else missing).append((k, c, n, binary))
    for k, c, n, b in missing:
        print(f"npb-runs: skipping {k}.{c} on {n} ranks: no {b}", file=sys.stderr)
    if not kernels:
        sys.exit("npb-runs: none of the kernels has a binary in --npb")
    return kernels


def launch(mpi, label, kernel, args, timeout, log, mem_report):
    """Runs one kernel over transport `label` (a name of scripts/transports.sh); returns
    (status, seconds, mops)."""
    k, c, n, binary = kernel
    cmd = launch_command(label) + ["-n", str(n), "--timeout", str(timeout)]
    if args.provider_dir:
        cmd += ["--provider-dir", args.provider_dir]
    # Two ranks are bound to the two cores, as in baselines.md; more are oversubscribed, unbound.
    # Not on namespaces as hosts: each "host" has the same cores, so every rank would get core 0.
    if n <= (os.cpu_count() or 1) and not os.environ.get("MPIRUN_DIWARP_NETNS"):
        cmd += (["--mpi-arg", "-bind-to", "--mpi-arg", "core"] if mpi == "mpich" else
                ["--mpi-arg", "--bind-to", "--mpi-arg", "core", "--mpi-arg", "--map-by",
                 "--mpi-arg", "core"])
    cmd += ["--", str(binary)]
    env = dict(os.environ)
    if is_diwarp(label):
        env["FI_DIWARP_MEM_REPORT"] = str(mem_report)
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=binary.parent, env=env).returncode
    text = Path(log).read_text(errors="replace")
    t, mops, verify = TIME_RE.search(text), MOPS_RE.search(text), VERIFY_RE.search(text)
    if rc == 124:
        status = "hang"
    elif rc == 0 and verify and verify.group(1) == "SUCCESSFUL":
        status = "ok"
    elif verify and verify.group(1) != "SUCCESSFUL":
        status = "wrong"
    else:
        status = f"exit {rc}"
    return (status, float(t.group(1)) if t else None, float(mops.group(1)) if mops else None)


# Transport counters each diwarp rank writes at finalize (FI_DIWARP_MEM_REPORT), summed per run.
COUNTERS = ("datagrams_sent", "retransmits", "spurious_retransmits", "duplicates", "acks_sent",
            "progress_wakes", "rc_messages")


def mem_summary(path):
    """Sums of the diwarp counters every rank wrote at finalize (its memory report, one JSON
    object per line), and the largest queue-pair share of a ledger (bytes)."""
    if not path.exists():
        return {}
    tot = defaultdict(int)
    qp_accounts = ("peer_state", "send_queue", "retransmit", "receive_ring", "staged", "engine",
                   "fault_layer")
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("at") != "finalize":
            continue
        c = r["counters"]
        paths = c.get("paths") or {}
        fields = dict(c["queue_pair"], progress_wakes=c["progress_wakes"],
                      rc_messages=paths.get("rc_messages", 0))
        for k in COUNTERS:
            tot[k] += fields.get(k, 0)
        # RC connections (rc, hybrid): the most any rank had open at once.
        tot["rc_open_peak"] = max(tot["rc_open_peak"], paths.get("open_peak", 0))
        qp = sum(r["ledger"]["accounts"][a]["current"] for a in qp_accounts)
        tot["queue_pair_max"] = max(tot["queue_pair_max"], qp)
        tot["ranks"] += 1
    return dict(tot)


def cell(rows):
    """A transport's entry for one kernel: median time of the ok runs, and what went wrong."""
    ok = [r["time_s"] for r in rows if r["status"] == "ok" and r["time_s"] is not None]
    bad = defaultdict(int)
    for r in rows:
        if r["status"] != "ok":
            bad[r["status"]] += 1
    notes = ", ".join(f"{s.upper() if s == 'hang' else s} {n}/{len(rows)}" for s, n in bad.items())
    if not ok:
        return None, f"**{notes}**" if notes else "–"
    med = statistics.median(ok)
    spread = " (" + "/".join(f"{x:.2f}" for x in ok) + ")" if len(ok) > 1 else ""
    return med, f"{med:.2f}{spread}" + (f" **{notes}**" if notes else "")


def network():
    """Where the ranks ran: loopback, or namespaces standing in for hosts."""
    ns = os.environ.get("MPIRUN_DIWARP_NETNS")
    return f"ranks round-robin on network namespaces {ns} as hosts" if ns else "loopback"


def ratio_pairs(labels):
    """(a, b) for every ratio column: every diwarp transport (any mode) to every other transport,
    or with no other transport, every later diwarp one to the first."""
    diwarps = [lab for lab in labels if is_diwarp(lab)]
    peers = [lab for lab in labels if not is_diwarp(lab)]
    if peers:
        return [(d, p) for d in diwarps for p in peers]
    return [(d, diwarps[0]) for d in diwarps[1:]]


def report(results, kernels, labels, cmdline, when):
    pairs = ratio_pairs(labels)
    modes = [f"{lab} = {table()[lab]['mode']}" for lab in labels if is_diwarp(lab)]
    lines = [
        "# NPB over diwarp and its peers",
        "",
        f"Made with `{cmdline}` ({when}; {os.cpu_count()} cores, {network()}, shared memory off).",
        "NPB's own \"Time in seconds\", median of the verified runs, every run in brackets;",
        "HANG = killed at the timeout, `wrong` = verification failed. " + (
            "No rank is bound to a core (the namespaces share the machine's cores)."
            if os.environ.get("MPIRUN_DIWARP_NETNS") else
            "Two ranks are bound to the two cores; more ranks are oversubscribed and unbound."),
        *(["diwarp's mode (FI_DIWARP_MODE and the entry's other settings in scripts/transports.sh; "
            "hybrid (default) = none set): " + "; ".join(modes) + "."] if modes else []),
        "",
        "| " + " | ".join(["kernel", *labels, *(f"{a} ÷ {b}" for a, b in pairs)]) + " |",
        "|---|" + "---:|" * (len(labels) + len(pairs)),
    ]
    for k, c, n, _ in kernels:
        key = f"{k}.{c} np={n}"
        meds, cells = {}, []
        for lab in labels:
            med, text = cell(results[(key, lab)])
            meds[lab] = med
            cells.append(text)
        ratios = []
        for a, b in pairs:
            if meds[a] and meds[b]:
                ratios.append(f"{meds[a] / meds[b]:.2f}")
            else:
                ratios.append("–")
        lines.append("| " + " | ".join([key, *cells, *ratios]) + " |")
    return "\n".join(lines) + "\n"


def plot(results, kernels, labels, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [f"{k}.{c} np={n}" for k, c, n, _ in kernels]
    fig, ax = plt.subplots(figsize=(max(8, 1.4 * len(keys)), 4.5))
    width = 0.8 / len(labels)
    meds = {(key, lab): cell(results[(key, lab)])[0] for key in keys for lab in labels}
    top = max([m for m in meds.values() if m] or [1.0])
    for i, lab in enumerate(labels):
        xs, ys = [], []
        for j, key in enumerate(keys):
            med = meds[(key, lab)]
            x = j + (i - (len(labels) - 1) / 2) * width
            if med:
                xs.append(x)
                ys.append(med)
            elif results[(key, lab)]:
                ax.text(x, top * 0.02, "hang" if any(r["status"] == "hang"
                        for r in results[(key, lab)]) else "fail",
                        rotation=90, ha="center", va="bottom", fontsize=8, color="red")
        mode = table()[lab]["mode"].split(",")[0].split()[0] if is_diwarp(lab) else None
        ax.bar(xs, ys, width, label=f"{lab}: {table()[lab]['mode']}" if mode else lab,
               hatch={"rc": "//", "hybrid": "xx"}.get(mode), edgecolor="black" if mode else None,
               linewidth=0.5 if mode else None)
    ax.set_xticks(range(len(keys)), keys, rotation=20)
    ax.set_ylabel("NPB time (s), median of verified runs")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(f"NAS Parallel Benchmarks: diwarp and its peers ({network()}, shared memory off)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    args = parse_args()
    cmdline = "npb-runs/run " + " ".join(sys.argv[1:])
    kernels = parse_kernels(args.kernels, args.npb)
    mpi = args.mpi if args.mpi != "auto" else detect_mpi(kernels[0][3])
    if mpi is None:
        sys.exit(f"npb-runs: cannot tell which MPI {kernels[0][3]} links; give --mpi")
    labels = []
    for t in (args.transports or DEFAULT_TRANSPORTS[mpi]).split(","):
        lab = resolve(mpi, t)
        if lab is None:
            sys.exit(f"npb-runs: transport '{t}' is neither one of scripts/mpirun-diwarp's for {mpi} "
                     f"nor a name of scripts/transports.sh for it ("
                     + ", ".join(sorted(n for n, e in table().items() if e["mpi"] == mpi)) + ")")
        if lab not in labels:
            labels.append(lab)
    # diwarp's transports first, in the order given.
    labels = [lab for lab in labels if is_diwarp(lab)] + [lab for lab in labels if not is_diwarp(lab)]
    for v in ("FI_DIWARP_MODE", "FI_DIWARP_RC_MAX"):
        if v in os.environ and any(is_diwarp(lab) for lab in labels):
            print(f"npb-runs: note: {v}={os.environ[v]} in the environment is not used: each "
                  "transport's name chooses it (diwarp-rc, diwarp-hybrid, ...)", file=sys.stderr)
    names = sorted({b.name for *_, b in kernels})
    stray = subprocess.run(["pgrep", "-x", "|".join(names)], capture_output=True, text=True)
    if stray.stdout.strip():
        print(f"npb-runs: warning: NPB ranks already running ({stray.stdout.split()}); "
              "numbers will suffer", file=sys.stderr)

    target = Path(os.environ.get("CARGO_TARGET_DIR", HERE / "target"))
    when = datetime.datetime.now(datetime.timezone.utc)
    out = args.out or target / "npb-runs" / when.strftime("%Y%m%d-%H%M%S")
    (out / "logs").mkdir(parents=True, exist_ok=True)

    results = defaultdict(list)
    fields = ["mpi", "transport", "kernel", "class", "ranks", "run", "status", "time_s", "mops",
              *COUNTERS, "queue_pair_max", "rc_open_peak"]
    done, total, started = 0, args.runs * len(kernels) * len(labels), time.monotonic()
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for run in range(1, args.runs + 1):
            for kern in kernels:
                k, c, n, _ = kern
                key = f"{k}.{c} np={n}"
                timeout = args.timeout or TIMEOUTS.get(c, 600)
                for lab in labels:
                    stem = f"{k}.{c}.{n}-{lab}-run{run}"
                    mem = out / "logs" / f"{stem}-mem.txt"
                    status, secs, mops = launch(mpi, lab, kern, args, timeout,
                                                out / "logs" / f"{stem}.log", mem)
                    m = mem_summary(mem)
                    row = {"mpi": mpi, "transport": lab, "kernel": k, "class": c, "ranks": n,
                           "run": run, "status": status, "time_s": secs, "mops": mops,
                           **{x: m.get(x, "") for x in fields[9:]}}
                    w.writerow(row)
                    f.flush()
                    results[(key, lab)].append(row)
                    shown = f"{secs:8.2f} s" if secs is not None else "       –  "
                    extra = (f"  retransmits {m['retransmits']} ({m['spurious_retransmits']} "
                             f"needless) of {m['datagrams_sent']} datagrams, "
                             f"{m['progress_wakes']} progress-thread wakes" if m else "")
                    if m.get("rc_open_peak") or m.get("rc_messages"):
                        extra += (f", {m['rc_messages']} messages over RC, at most "
                                  f"{m['rc_open_peak']} RC connections per rank")
                    done += 1
                    print(f"{progress(done, total, started)} run {run}/{args.runs} {key:12} {lab:21} "
                          f"{shown}  {status}{extra}", flush=True)

    md = report(results, kernels, labels, cmdline,
                when.strftime("%Y-%m-%d %H:%M UTC"))
    (out / "results.md").write_text(md)
    print()
    print(md)
    if args.plot:
        plot(results, kernels, labels, out / "results.png")
        print(f"plot: {out / 'results.png'}")
    print(f"runs: {out / 'runs.csv'}; logs: {out / 'logs'}")
    ok = any(r["status"] == "ok" for rows in results.values() for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
