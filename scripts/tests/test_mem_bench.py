"""`diwarp mem-bench` end to end, briefly: footprint on 2 ranks, MPICH over diwarp and over
libfabric's tcp, one run of one round. Every launch must end ok, raw.csv must hold every rank of
every launch, ledger.csv diwarp's finalize lines, and results.md diwarp's ratio to tcp as a number
in every table."""
import csv
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import build_diwarp, run_clean

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = ["Anonymous after traffic", "User + kernel after traffic", "MPI + transport after traffic",
          "Anonymous grown by the traffic", "VmRSS after traffic", "Pss after traffic", "VmHWM"]


class MemBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.diwarp = build_diwarp()
        cls.out = tempfile.mkdtemp(prefix="diwarp-mem-bench-")
        cls.result = run_clean(
            [cls.diwarp, "mem-bench", "--runs", "1", "--ranks", "2", "--rounds", "1",
             "--transports", "mpich-diwarp,mpich-tcp", "--timeout", "60", "--out", cls.out])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.out, name)) as f:
            return f.read()

    def rows(self, name):
        return list(csv.DictReader(self.read(name).splitlines()))

    def test_exits_0_and_every_launch_is_ok(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        self.assertEqual([(r["transport"], r["ranks"], r["run"], r["status"]) for r in self.rows("runs.csv")],
                         [("mpich-diwarp", "2", "1", "ok"), ("mpich-tcp", "2", "1", "ok")])
        progress = [l for l in self.result.stdout.splitlines() if " run 1/1 " in l]
        self.assertEqual(len(progress), 2, self.result.stdout)
        self.assertRegex(progress[0], r"^\[1/2 ~\d+:\d\d left\] run 1/1  np=2  mpich-diwarp +ok  "
                                      r"\(report: 2 finalize lines\)$")
        self.assertRegex(progress[1], r"^\[2/2 ~\d+:\d\d left\] run 1/1  np=2  mpich-tcp +ok$")

    def test_raw_has_every_rank_and_the_ledger_diwarps_finalize_lines(self):
        raw = self.rows("raw.csv")
        self.assertEqual(sorted((r["transport"], r["rank"]) for r in raw),
                         [("mpich-diwarp", "0"), ("mpich-diwarp", "1"), ("mpich-tcp", "0"), ("mpich-tcp", "1")])
        for r in raw:
            self.assertEqual(len(r), 14, r)
            self.assertTrue(all(v.isdigit() for k, v in r.items() if k != "transport"), r)
        ledger = self.rows("ledger.csv")
        self.assertEqual([(r["transport"], r["ranks"]) for r in ledger], [("mpich-diwarp", "2")] * 2)
        for r in ledger:
            self.assertGreater(int(r["total"]), 0, r)
            self.assertGreater(float(r["explained"]), 0, r)
        self.assertTrue(os.path.exists(os.path.join(self.out, "logs/mpich-diwarp.np2.1.mem.jsonl")))

    def test_results_give_diwarps_ratio_to_tcp(self):
        md = self.read("results.md")
        self.assertIn("Made with `diwarp mem-bench --runs 1 --ranks 2 ", md)
        for title in TABLES:
            with self.subTest(table=title):
                table = md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
                lines = [l for l in table.splitlines() if l.startswith("|")]
                head = [c.strip() for c in lines[0].strip("|").split("|")]
                self.assertEqual(head, ["ranks", "mpich-diwarp", "mpich-tcp", "mpich-diwarp ÷ mpich-tcp"])
                self.assertEqual(len(lines), 3, table)
                cells = [c.strip() for c in lines[2].strip("|").split("|")]
                self.assertEqual(cells[0], "2")
                for c in cells[1:]:
                    self.assertRegex(c, r"^-?\d+\.\d+$", cells)
        self.assertIn("## diwarp's ledger at finalize", md)
        self.assertIn("| heap growth explained | ", md)
        metrics = {(r["transport"], r["metric"]) for r in self.rows("results.csv")}
        self.assertEqual(len(metrics), 2 * len(TABLES))


if __name__ == "__main__":
    unittest.main()
