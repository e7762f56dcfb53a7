"""Tests of scripts/mem-report: synthetic reports with known costs, the projection checked exactly;
--check against the real channel/mem-report.schema.json and the ledger's rules.

Run with the venv's python:  .venv/bin/python -m unittest discover -s scripts/tests -v
(or scripts/tests/run, which scripts/test calls).
"""
import csv
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MEM_REPORT = os.path.join(HERE, "..", "mem-report")
SCHEMA_FILE = os.path.join(HERE, "..", "..", "channel", "mem-report.schema.json")
POWERS = [2 ** k for k in range(1, 21)]

# The ledger's accounts (policies/src/ledger/account.rs) and the counters, as a current
# provider writes them: full_report() is a complete line that the real schema accepts.
ACCOUNTS = [("peer_state", "peers"), ("send_queue", "traffic"), ("retransmit", "traffic"),
            ("receive_ring", "fixed"), ("staged", "traffic"), ("unexpected", "traffic"),
            ("held_pushes", "traffic"), ("send_pool", "traffic"), ("rendezvous", "traffic"),
            ("rma", "fixed"), ("address_vector", "peers"), ("completion_queues", "traffic"),
            ("matching", "traffic"), ("engine", "peers"), ("fault_layer", "traffic"),
            ("connections", "connections")]
DATA_COUNTERS = ["sent", "received", "malformed", "stray", "failed_sends", "failed_recvs",
                 "push_dropped", "push_parked", "push_placed", "chunks_in_place", "rma_writes_in", "rma_reads_in", "rma_refused", "atomics_in"]
PEER_COUNTERS = ["short", "stale", "duplicates", "held", "restarts", "acks_sent", "acks_received"]
PATH_COUNTERS = ["open", "connected", "initiated", "refused", "refused_by_peer", "failed", "demoted", "demoted_by_peer", "lost",
                 "resent", "rc_messages", "open_peak", "timed_out", "probes", "promotions", "demoted_idle", "demoted_for_hotter", "closed_by_peer"]
QP_COUNTERS = ["datagrams_sent", "datagrams_received", "datagrams_read", "data_sent", "retransmits",
               "spurious_retransmits", "lost_acks", "timeouts", "tail_probes", "duplicates", "out_of_order",
               "dropped", "dropped_checksum", "acks_sent", "window_full", "would_block", "messages_acked",
               "messages_delivered", "srtt_us", "peers", "connected_peers", "crc_peers", "dormant_peers",
               "sessions_open", "sessions_frozen", "sessions_resumed", "control_sent",
               "control_received", "dropped_control", "dropped_malformed", "dropped_unauthenticated",
               "dropped_unknown_session",
               "handshake_failures", "peer_failures", "stalls", "sends_handed_back", "parked", "refused", "stashed", "protocol_errors",
               "send_errors", "connected_sends", "gso_sends", "gro_runs", "max_datagram_size"]


def full_report(pid, at="finalize", peers=3, faults=False):
    """A complete report line (every field of diwarp-mem-report/1), its ledger consistent."""
    accounts = {}
    for k, (name, scale) in enumerate(ACCOUNTS):
        cur = 1000 * (k + 1)
        accounts[name] = {"current": cur, "peak": cur + 10 * k,
                          "peers": (peers + (name == "address_vector")) if scale == "peers" else None,
                          "scale": scale}
    total = sum(a["current"] for a in accounts.values())
    qp = {k: i for i, k in enumerate(QP_COUNTERS)}
    qp.update(srtt_us=None if at == "running" else 591, peers=peers, max_datagram_size=65507)
    return {
        "schema": "diwarp-mem-report/1", "pid": pid, "endpoint": f"diwarp://127.0.0.1:{pid}/1/0#bd98",
        "at": at, "elapsed_ms": 99,
        "ledger": {"total": total, "total_peak": total + 500, "samples": 16, "accounts": accounts},
        "budget": {"copies": 64 << 20, "held_pushes": 16 << 20, "spare": 8 << 20},
        "baseline": {"provider_heap": 1061602, "ledger": 1054080},
        "growth": {"provider_heap": -5, "ledger": 1641533, "explained": None},
        "unexplained": -11237,
        "heap": {"provider": 2706850, "process_in_use": 25806176, "process_held": 26136576},
        "process": {"vm_rss": 17797120, "vm_hwm": 24629248, "rss_anon": 6651904, "rss_file": 10080256,
                    "pss": 9955328, "pss_anon": 6651904, "fds": 22, "sockets": 7},
        "kernel": {"sockets": 4, "rmem_alloc": 0, "wmem_alloc": 0, "wmem_queued": 0, "fwd_alloc": 4096,
                   "optmem": 0, "rcvbuf": 9027584, "sndbuf": 33554432, "drops": 0, "held": 4096},
        "counters": {
            "data": {k: i for i, k in enumerate(DATA_COUNTERS)},
            "peers": {k: i for i, k in enumerate(PEER_COUNTERS)},
            "paths": {k: i for i, k in enumerate(PATH_COUNTERS)},
            "queue_pair": qp,
            "faults": ({"datagrams": 500, "dropped": 25, "duplicated": 24, "reordered": 50, "delayed": 0,
                        "corrupted": 10} if faults else None),
            "progress_wakes": 1,
            "rails": [{"address": "10.0.0.1:40000", "data_sent": 7, "retransmits": 1, "datagrams_read": 9,
                       "chunks": 3, "chunks_per_s": 1500.5, "stalls": 2, "taken_down": 1, "back_up": 1,
                       "moved": 4, "failed": 0}],
        },
    }


def report(pid, peer_state, engine, av_entry, fixed_ring, traffic, held, peers, at="finalize"):
    """One report line: peer_state and engine scale with `peers`, address_vector with `peers` + 1
    (it also holds the rank itself), receive_ring is fixed, send_pool scales with traffic."""
    accounts = {
        "peer_state": {"current": peer_state * peers, "peak": peer_state * peers + 7, "peers": peers, "scale": "peers"},
        "engine": {"current": engine * peers, "peak": engine * peers, "peers": peers, "scale": "peers"},
        "address_vector": {"current": av_entry * (peers + 1), "peak": av_entry * (peers + 1), "peers": peers + 1,
                           "scale": "peers"},
        "receive_ring": {"current": fixed_ring, "peak": fixed_ring, "peers": None, "scale": "fixed"},
        "send_pool": {"current": traffic, "peak": 2 * traffic, "peers": None, "scale": "traffic"},
        # A peer-scaled account covering no peer counts as fixed.
        "rma": {"current": 100, "peak": 100, "peers": 0, "scale": "peers"},
    }
    total = sum(a["current"] for a in accounts.values())
    return {
        "schema": "diwarp-mem-report/1", "pid": pid, "endpoint": f"diwarp://127.0.0.1:{pid}/1/0#00", "at": at,
        "elapsed_ms": 10,
        "ledger": {"total": total, "total_peak": total + 1000, "samples": 3, "accounts": accounts},
        "baseline": {"provider_heap": 1000, "ledger": 900},
        "growth": {"provider_heap": 2000, "ledger": 1900, "explained": 0.95},
        "unexplained": 100,
        "heap": {"provider": total + 100, "process_in_use": 10 ** 7, "process_held": 2 * 10 ** 7},
        "process": {"vm_rss": 3 * 10 ** 7, "vm_hwm": 4 * 10 ** 7, "rss_anon": 10 ** 7, "rss_file": 2 * 10 ** 7,
                    "pss": 2 * 10 ** 7, "pss_anon": 10 ** 7, "fds": 20, "sockets": 6},
        "kernel": {"sockets": 3, "rmem_alloc": 0, "wmem_alloc": 0, "wmem_queued": 0, "fwd_alloc": held,
                   "optmem": 0, "rcvbuf": 1, "sndbuf": 1, "drops": 0, "held": held},
        "counters": {"data": {}, "queue_pair": {"peers": peers}, "faults": None, "progress_wakes": 0},
    }


class ReportFiles(unittest.TestCase):
    """A temporary directory to write report files into."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, objs):
        """A report file of `objs`, one line each (a string is written as it is)."""
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for o in objs:
                f.write((o if isinstance(o, str) else json.dumps(o)) + "\n")
        return path


class Tool(ReportFiles):
    """Runs mem-report; three_ranks() is a job of known costs."""

    def run_tool(self, *args, ok=True):
        p = subprocess.run([MEM_REPORT, *args], capture_output=True, text=True, timeout=120)
        if ok:
            self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def projection(self, *args):
        out = os.path.join(self.dir, "proj.csv")
        p = self.run_tool(*args, "--csv", out)
        table = {}
        with open(out) as f:
            for row in csv.DictReader(f):
                table[(row["model"], int(row["ranks"]))] = (row["kind"], int(row["bytes"]))
        return table, p.stdout

    def three_ranks(self):
        # 3 peers each. Per peer: peer_state + engine + av_entry; the median rank is pid 11
        # (per peer 1000 + 150 + 50 = 1200), the fixed part's median is pid 12's.
        #   pid 10: per peer 1100, fixed = 100000 + 40000 + 100 + 4096
        #   pid 11: per peer 1200, fixed = 100000 + 50000 + 100 + 4096 = 154196
        #   pid 12: per peer 1500, fixed = 100000 + 45000 + 100 + 4096
        # fixed median = 100000 + 45000 + 100 + 4096 = 149196
        return [report(10, 900, 150, 50, 100000, 40000, 4096, 3),
                report(11, 1000, 150, 50, 100000, 50000, 4096, 3),
                report(12, 1300, 150, 50, 100000, 45000, 4096, 3)]


class MemReport(Tool):

    def test_projection_ud_rc_hybrid(self):
        a = self.write("a.jsonl", self.three_ranks()[:2])
        b = self.write("b.jsonl", self.three_ranks()[2:] + [report(12, 1, 1, 1, 1, 1, 1, 3, at="running")])
        table, out = self.projection(a, b, "--rc-cost", "64K", "--caps", "4,16", "--ranks", "3,1000",
                                     "--per-peer", "job")
        fixed, per_peer, rc = 149196, 1200, 65536
        ranks = sorted(set(POWERS + [3, 1000]))
        for n in ranks:
            self.assertEqual(table[("ud", n)], ("ledger", fixed + per_peer * (n - 1)), n)
            self.assertEqual(table[("rc", n)], ("ledger", fixed + (per_peer + rc) * (n - 1)), n)
            for cap in (4, 16):
                self.assertEqual(table[(f"hybrid-cap{cap}", n)],
                                 ("ledger", fixed + per_peer * (n - 1) + rc * min(cap, n - 1)), n)
        self.assertEqual(len(table), 4 * len(ranks))
        self.assertIn("3 endpoint(s) at finalize from 2 file(s); 1 running line(s) not used", out)
        self.assertIn("median 95.0%, min 95.0% over 3 rank(s)", out)

    def test_without_rc_cost_only_ud(self):
        path = self.write("r.json", self.three_ranks())
        table, out = self.projection(path, "--per-peer", "job")
        self.assertEqual({m for m, _ in table}, {"ud"})
        self.assertEqual(table[("ud", 1048576)], ("ledger", 149196 + 1200 * 1048575))
        self.assertIn("rc and hybrid are not projected: give --rc-cost", out)

    def test_directory_and_glob(self):
        for i, o in enumerate(self.three_ranks()):
            self.write(f"rank{i}.json", [o])
        self.write("notes.txt", ["not a report"])
        t1, _ = self.projection(self.dir, "--per-peer", "job")
        t2, _ = self.projection(os.path.join(self.dir, "rank*.json"), "--per-peer", "job")
        self.assertEqual(t1[("ud", 64)], ("ledger", 149196 + 1200 * 63))
        self.assertEqual(t1, t2)

    def test_peer_fit(self):
        rep = self.write("r.json", self.three_ranks())
        res = os.path.join(self.dir, "bench")
        os.mkdir(res)
        cols = ["transport", "ranks", "run", "rank", "rss0_kb", "rss1_kb", "hwm_kb", "anon0_kb", "anon1_kb",
                "pss1_kb", "sock1", "kheld0_kb", "kheld1_kb"]
        with open(os.path.join(res, "raw.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for t, fixed_kb, per_kb, kernel_kb in (("mpich-tcp", 5000, 30, 2), ("ompi-btl-tcp", 8000, 100, 16)):
                for n in (2, 4, 8):
                    for rank in range(n):
                        # Exactly linear in the mean; +-1 KiB on alternate ranks cancels out.
                        wobble = (1 if rank % 2 else -1)
                        anon = fixed_kb + per_kb * (n - 1) + wobble
                        w.writerow([t, n, 1, rank, 0, 0, 0, 0, anon, 0, 3, 0, kernel_kb * (n - 1)])
            w.writerow(["mpich-udp-rxd", 2, 1, 0, 0, 0, 0, 0, 9000, 0, 2, 0, 4])
        table, out = self.projection(rep, "--peers", res)
        for n in POWERS:
            self.assertEqual(table[("mpich-tcp", n)], ("fit", 1024 * (5000 + 32 * (n - 1))), n)
            self.assertEqual(table[("ompi-btl-tcp", n)], ("fit", 1024 * (8000 + 116 * (n - 1))), n)
        self.assertNotIn(("mpich-udp-rxd", 2), table)
        self.assertIn("mpich-udp-rxd: not fitted, one rank count only (2)", out)
        self.assertIn("footprint's own buffers included: no app_kb column", out)
        # The raw.csv itself works too.
        t2, _ = self.projection(rep, "--peers", os.path.join(res, "raw.csv"))
        self.assertEqual(table, t2)

    def test_peer_fit_without_application_buffers(self):
        # footprint's own buffers (app_kb: 2048 + 1024 per peer + 128 per rank KiB) are taken out.
        rep = self.write("r.json", self.three_ranks())
        raw = os.path.join(self.dir, "raw.csv")
        with open(raw, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["transport", "ranks", "run", "rank", "anon1_kb", "kheld1_kb", "app_kb"])
            for n in (2, 3, 16):
                for rank in range(n):
                    app = 2048 + 1024 * (n - 1) + 128 * n
                    w.writerow(["mpich-tcp", n, 1, rank, app + 6000 + 40 * (n - 1), 8 * (n - 1), app])
        table, out = self.projection(rep, "--peers", raw)
        for n in POWERS:
            self.assertEqual(table[("mpich-tcp", n)], ("fit", 1024 * (6000 + 48 * (n - 1))), n)
        self.assertIn("- footprint's own buffers:", out)

    def test_wrong_schema(self):
        bad = report(10, 1, 1, 1, 1, 1, 1, 1)
        bad["schema"] = "diwarp-mem-report/0"
        path = self.write("bad.jsonl", [self.three_ranks()[0], bad])
        p = self.run_tool(path, ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bad.jsonl:2: schema 'diwarp-mem-report/0', want 'diwarp-mem-report/1'", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_other_errors(self):
        cases = [
            ([os.path.join(self.dir, "missing.json")], "missing.json: no such file"),
            ([self.write("running.json", [report(10, 1, 1, 1, 1, 1, 1, 1, at="running")])],
             "no finalize line in"),
            ([self.write("garbage.json", ["{not json"])], "garbage.json:1: not JSON"),
            ([os.path.join(self.dir, "*.nothing")], "matches no file"),
            ([self.write("ok.json", self.three_ranks()), "--peers", os.path.join(self.dir, "nope")],
             "--peers"),
        ]
        for argv, msg in cases:
            p = self.run_tool(*argv, ok=False)
            self.assertEqual(p.returncode, 1, (argv, p.stderr))
            self.assertIn(msg, p.stderr, argv)
        p = self.run_tool("--rc-cost", "lots", self.write("x.json", self.three_ranks()), ok=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not a size in bytes", p.stderr)


class PerPeer(Tool):
    """--per-peer: the job's own peers at its ledger's figure, every further peer at a measured one.
    three_ranks(): fixed 149196, per peer 1200, 3 peers."""

    FIXED, PER_PEER, PEERS = 149196, 1200, 3

    def expected(self, n, idle, extra=0):
        """(kind, bytes) of a ledger model at n ranks, from the header's formula."""
        if n - 1 <= self.PEERS:
            return "ledger", round(self.FIXED + self.PER_PEER * (n - 1) + extra)
        return "measured", round(self.FIXED + self.PER_PEER * self.PEERS + idle * (n - 1 - self.PEERS) + extra)

    def scale_json(self, path, rows, **more):
        with open(path, "w") as f:
            json.dump({"av_entry_bytes": 90.0, "idle_peer_bytes": rows, **more}, f)
        return path

    def test_a_byte_figure(self):
        rep = self.write("r.json", self.three_ranks())
        rc = 65536
        for arg, idle in (("300", 300), ("0.5K", 512), ("2KiB", 2048)):
            table, out = self.projection(rep, "--per-peer", arg, "--rc-cost", "64K", "--caps", "4",
                                         "--ranks", "3,4,5,1000")
            for n in sorted(set(POWERS + [3, 4, 5, 1000])):
                with self.subTest(per_peer=arg, n=n):
                    self.assertEqual(table[("ud", n)], self.expected(n, idle))
                    self.assertEqual(table[("rc", n)], self.expected(n, idle, rc * (n - 1)))
                    self.assertEqual(table[("hybrid-cap4", n)], self.expected(n, idle, rc * min(4, n - 1)))
            # The step is at the job's own count: 4 ranks are its 3 peers, 5 the first one beyond.
            self.assertEqual(table[("ud", 4)][0], "ledger")
            self.assertEqual(table[("ud", 5)][0], "measured")
            self.assertIn("per peer = 1.17 KiB, the job's own", out)
            self.assertIn(f"beyond the job's 3, from --per-peer {arg}", out)
            self.assertIn("peers(N) = per_peer * min(N-1, 3) + idle * max(0, N-1-3)", out)
        self.assertEqual(table[("ud", 1048576)], ("measured", 149196 + 1200 * 3 + 2048 * (1048575 - 3)))

    def test_a_json_file(self):
        rep = self.write("r.json", self.three_ranks())
        # The row of the most peers counts, wherever it stands.
        src = self.scale_json(os.path.join(self.dir, "scale.json"),
                              [{"peers": 1024, "bytes": 450.5}, {"peers": 1048576, "bytes": 240.25},
                               {"peers": 1, "bytes": 12352.0}, {"peers": 65536, "bytes": 245.0}],
                              peer_state_by_layer={"peer table": 114})
        table, out = self.projection(rep, "--per-peer", src)
        for n in POWERS:
            self.assertEqual(table[("ud", n)], self.expected(n, 240.25), n)
        self.assertIn(f"from {src}, an idle peer at 1048576 peers", out)
        self.assertIn("peers beyond the job's 3 at idle = 240 B", out)

    def test_job_keeps_the_jobs_figure(self):
        rep = self.write("r.json", self.three_ranks())
        table, out = self.projection(rep, "--per-peer", "job", "--rc-cost", "1K", "--ranks", "3,1000")
        for n in sorted(set(POWERS + [3, 1000])):
            self.assertEqual(table[("ud", n)], ("ledger", 149196 + 1200 * (n - 1)), n)
            self.assertEqual(table[("rc", n)], ("ledger", 149196 + (1200 + 1024) * (n - 1)), n)
        self.assertEqual({k for k, _ in table.values()}, {"ledger"})
        self.assertIn("every peer at the job's figure, peers(N) = per_peer * (N-1) (--per-peer job)", out)

    def tree(self, scale_rows=None, scale_text=None):
        """A copy of the repository's layout mem-report needs (the script, the venv, the schema),
        with channel/bench/peer-scale.json holding `scale_rows` or `scale_text`, or absent."""
        root = os.path.join(self.dir, "repo")
        os.makedirs(os.path.join(root, "scripts"))
        os.makedirs(os.path.join(root, "channel", "bench"))
        shutil.copy(MEM_REPORT, os.path.join(root, "scripts", "mem-report"))
        shutil.copy(SCHEMA_FILE, os.path.join(root, "channel"))
        os.symlink(os.path.realpath(os.path.join(HERE, "..", "..", ".venv")), os.path.join(root, ".venv"))
        scale = os.path.join(root, "channel", "bench", "peer-scale.json")
        if scale_rows is not None:
            self.scale_json(scale, scale_rows)
        elif scale_text is not None:
            with open(scale, "w") as f:
                f.write(scale_text)
        return os.path.join(root, "scripts", "mem-report")

    def run_copy(self, tool, *args):
        out = os.path.join(self.dir, "proj.csv")
        p = subprocess.run([tool, *args, "--csv", out], capture_output=True, text=True, timeout=120)
        table = {}
        if p.returncode == 0:
            with open(out) as f:
                table = {(r["model"], int(r["ranks"])): (r["kind"], int(r["bytes"])) for r in csv.DictReader(f)}
        return p, table

    def test_the_default_file(self):
        rep = self.write("r.json", self.three_ranks())
        tool = self.tree([{"peers": 1, "bytes": 9000}, {"peers": 4096, "bytes": 333}])
        p, table = self.run_copy(tool, rep)
        self.assertEqual(p.returncode, 0, p.stderr)
        for n in POWERS:
            self.assertEqual(table[("ud", n)], self.expected(n, 333), n)
        self.assertIn("from channel/bench/peer-scale.json (the default), an idle peer at 4096 peers", p.stdout)
        self.assertIn("(--per-peer job: per_peer * (N-1))", p.stdout)
        # --per-peer job beside the default file is the projection without one.
        p_job, t_job = self.run_copy(tool, rep, "--per-peer", "job")
        os.remove(os.path.join(os.path.dirname(tool), "..", "channel", "bench", "peer-scale.json"))
        p_none, t_none = self.run_copy(tool, rep)
        self.assertEqual(p_none.returncode, 0, p_none.stderr)
        self.assertEqual(t_job, t_none)
        self.assertEqual(t_none[("ud", 1048576)], ("ledger", 149196 + 1200 * 1048575))
        self.assertIn("(no channel/bench/peer-scale.json; --per-peer sets one)", p_none.stdout)

    def test_the_repositorys_default_file(self):
        with open(os.path.join(HERE, "..", "..", "channel", "bench", "peer-scale.json")) as f:
            top = max(json.load(f)["idle_peer_bytes"], key=lambda r: r["peers"])
        table, out = self.projection(self.write("r.json", self.three_ranks()))
        self.assertEqual(table[("ud", 1048576)], self.expected(1048576, top["bytes"]))
        self.assertIn(f"channel/bench/peer-scale.json (the default), an idle peer at {top['peers']} peers", out)

    def test_bad_sources(self):
        rep = self.write("r.json", self.three_ranks())
        d = self.dir

        def file(name, text):
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(text if isinstance(text, bytes) else text.encode())
            return path

        cases = [
            (os.path.join(d, "missing.json"), "missing.json: no such file; want the scale test's JSON"),
            (d, ": not a regular file"),
            (file("garbage.json", "{not json"), "garbage.json: not JSON (Expecting property name"),
            (file("binary.json", b"\xff\xfe\x00"), "binary.json: not a text file"),
            (file("list.json", "[1, 2]"), "list.json: no idle_peer_bytes list"),
            (file("other.json", '{"av_entry_bytes": 90}'), "other.json: no idle_peer_bytes list"),
            (file("empty.json", '{"idle_peer_bytes": []}'), "empty.json: idle_peer_bytes is empty"),
            (file("zero.json", '{"idle_peer_bytes": [{"peers": 1024, "bytes": 0}]}'),
             'zero.json: idle_peer_bytes[0] is {"peers": 1024, "bytes": 0}, want'),
            (file("neg.json", '{"idle_peer_bytes": [{"peers": 1, "bytes": 9}, {"peers": -4, "bytes": 9}]}'),
             "neg.json: idle_peer_bytes[1] is"),
            (file("half.json", '{"idle_peer_bytes": [{"peers": 2.5, "bytes": 9}]}'), "half.json: idle_peer_bytes[0]"),
            (file("nan.json", '{"idle_peer_bytes": [{"peers": 8, "bytes": NaN}]}'), "nan.json: idle_peer_bytes[0]"),
            (file("inf.json", '{"idle_peer_bytes": [{"peers": 8, "bytes": Infinity}]}'), "inf.json: idle_peer_bytes[0]"),
            (file("text.json", '{"idle_peer_bytes": [{"peers": 8, "bytes": "240"}]}'), "text.json: idle_peer_bytes[0]"),
            (file("deep.json", "[" * 100000), "deep.json: not usable JSON"),
            ("0", "--per-peer 0: want a positive number of bytes"),
            ("-240", "--per-peer -240: want a positive number of bytes"),
            ("-1.5K", "--per-peer -1.5K: want a positive number of bytes"),
        ]
        for src, msg in cases:
            with self.subTest(src=src):
                p = self.run_tool(rep, "--per-peer", src, ok=False)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(msg, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertTrue(p.stderr.startswith("mem-report: --per-peer "), p.stderr)
                self.assertEqual(p.stdout, "")
        # A broken default file is an error too, not a silent fall back to the job's figure.
        p, _ = self.run_copy(self.tree(scale_text='{"idle_peer_bytes": 5}'), rep)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr, "mem-report: --per-peer channel/bench/peer-scale.json (the default): no "
                         "idle_peer_bytes list; want the scale test's JSON (DIWARP_SCALE_OUT), BYTES or job\n")


class Check(ReportFiles):
    """scripts/mem-report --check: the schema and the rules it cannot say."""

    def job(self, ranks=2):
        """One file per rank, as FI_DIWARP_MEM_REPORT=dir/memreport.%p.jsonl writes them."""
        for r in range(ranks):
            pid = 1000 + r
            self.write(f"memreport.{pid}.jsonl",
                       [full_report(pid, "running"), full_report(pid, "running", faults=True),
                        full_report(pid, faults=r == 1)])
        return self.dir

    def check(self, *args, ok):
        p = subprocess.run([MEM_REPORT, "--check", *args], capture_output=True, text=True, timeout=120)
        if ok:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stderr, "")
        else:
            self.assertEqual(p.returncode, 1, (p.stdout, p.stderr))
            self.assertEqual(p.stdout, "")
            self.assertIn("invalid", p.stderr)
        return p

    def broken(self, change):
        """A two-rank job whose second rank's finalize line `change` edits."""
        o = full_report(1001)
        change(o)
        self.write("memreport.1000.jsonl", [full_report(1000)])
        return self.write("memreport.1001.jsonl", [full_report(1001, "running"), o])

    def test_synthetic_report_matches_the_schema(self):
        import jsonschema
        with open(SCHEMA_FILE) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        v = jsonschema.Draft202012Validator(schema)
        for o in (full_report(1), full_report(2, "running", faults=True)):
            self.assertEqual([e.message for e in v.iter_errors(o)], [])
        self.assertEqual(list(schema["properties"]["ledger"]["properties"]["accounts"]["required"]),
                         [name for name, _ in ACCOUNTS])

    def test_valid(self):
        d = self.job(2)
        p = self.check("--expect-ranks", "2", d, ok=True)
        self.assertEqual(p.stdout, "mem-report: 6 reports from 2 ranks valid\n")
        p = self.check(os.path.join(d, "memreport.1000.jsonl"), ok=True)
        self.assertEqual(p.stdout, "mem-report: 3 reports from 1 ranks valid\n")
        # The analysis reads the same files.
        p = subprocess.run([MEM_REPORT, d], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 endpoint(s) at finalize from 2 file(s); 4 running line(s) not used", p.stdout)

    def test_missing_field(self):
        self.broken(lambda o: o["counters"]["queue_pair"].pop("srtt_us"))
        p = self.check(self.dir, ok=False)
        self.assertIn("memreport.1001.jsonl:2: counters.queue_pair: 'srtt_us' is a required property", p.stderr)
        self.broken(lambda o: o["ledger"]["accounts"].pop("fault_layer"))
        p = self.check(self.dir, ok=False)
        self.assertIn("ledger.accounts: 'fault_layer' is a required property", p.stderr)

    def test_extra_field(self):
        self.broken(lambda o: o["kernel"].update(shmem=0))
        p = self.check(self.dir, ok=False)
        self.assertIn("memreport.1001.jsonl:2: kernel: Additional properties are not allowed ('shmem' was unexpected)",
                      p.stderr)

    def test_wrong_types(self):
        def change(o):
            o["at"] = "closing"
            o["process"]["fds"] = -1
            o["growth"]["explained"] = "all"
            o["ledger"]["accounts"]["rma"]["scale"] = "ranks"
        self.broken(change)
        p = self.check(self.dir, ok=False)
        for msg in ("1001.jsonl:2: at: 'closing' is not one of", "process.fds: -1 is less than the minimum of 0",
                    "growth.explained: 'all' is not of type 'number', 'null'",
                    "ledger.accounts.rma.scale: 'ranks' is not one of"):
            self.assertIn(msg, p.stderr)

    def test_wrong_total(self):
        self.broken(lambda o: o["ledger"].update(total=o["ledger"]["total"] + 1))
        p = self.check(self.dir, ok=False)
        total = sum(1000 * (k + 1) for k in range(len(ACCOUNTS)))
        self.assertIn(f"memreport.1001.jsonl:2: ledger.total {total + 1} is not the sum of the accounts' current "
                      f"({total})", p.stderr)

    def test_peak_below_current(self):
        self.broken(lambda o: o["ledger"]["accounts"]["staged"].update(peak=1))
        p = self.check(self.dir, ok=False)
        self.assertIn("ledger.accounts.staged: peak 1 < current 5000", p.stderr)

    def test_two_finalize_lines(self):
        self.job(2)
        with open(os.path.join(self.dir, "memreport.1000.jsonl"), "a") as f:
            f.write(json.dumps(full_report(1000)) + "\n")
        p = self.check(self.dir, ok=False)
        self.assertRegex(p.stderr, r"pid 1000, endpoint \S+: 2 finalize lines")

    def test_two_endpoints_of_one_process(self):
        self.job(2)
        other = full_report(1000)
        other["endpoint"] = other["endpoint"].replace(":1000/", ":1001/")
        with open(os.path.join(self.dir, "memreport.1000.jsonl"), "a") as f:
            f.write(json.dumps(other) + "\n")
        self.check(self.dir, ok=True)

    def test_no_finalize_line(self):
        self.job(2)
        self.write("memreport.1002.jsonl", [full_report(1002, "running")])
        p = self.check(self.dir, ok=False)
        self.assertIn("pid 1002: no finalize line", p.stderr)

    def test_expect_ranks(self):
        d = self.job(3)
        self.check("--expect-ranks", "3", d, ok=True)
        for n in ("2", "4"):
            p = self.check("--expect-ranks", n, d, ok=False)
            self.assertIn(f"3 rank(s) with a finalize line, want {n} (--expect-ranks)", p.stderr)
        p = subprocess.run([MEM_REPORT, "--expect-ranks", "3", d], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--expect-ranks goes with --check", p.stderr)

    def test_foreign_and_garbage_lines(self):
        old = full_report(1000)
        old["schema"] = "diwarp-mem-report/0"
        path = self.write("old.jsonl", [old])
        with open(path, "a") as f:
            f.write("{not json\n")
        p = self.check(path, ok=False)
        self.assertIn("old.jsonl:1: schema 'diwarp-mem-report/0', want 'diwarp-mem-report/1'", p.stderr)
        self.assertIn("old.jsonl:2: not JSON", p.stderr)


if __name__ == "__main__":
    unittest.main()
