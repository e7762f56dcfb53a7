"""`diwarp bench` end to end, briefly: MPICH over diwarp and over libfabric's tcp, latency and bw,
1 B to 1 KiB, one run of few iterations. Every launch must end ok, and results.md must give
diwarp's ratio to tcp as a number at every size of both tables."""
import csv
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import build_diwarp, run_clean

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


class Bench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.diwarp = build_diwarp()
        cls.out = tempfile.mkdtemp(prefix="diwarp-bench-")
        cls.result = run_clean(
            [cls.diwarp, "bench", "--runs", "1", "--modes", "latency,bw", "--sizes", "1:1K",
             "--iters", "50", "--warmup", "5", "--transports", "mpich-diwarp,mpich-tcp",
             "--timeout", "60", "--out", cls.out])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.out, name)) as f:
            return f.read()

    def test_exits_0_and_every_launch_is_ok(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        rows = list(csv.DictReader(self.read("runs.csv").splitlines()))
        self.assertEqual([(r["transport"], r["mode"], r["status"]) for r in rows],
                         [("mpich-diwarp", "latency", "ok"), ("mpich-diwarp", "bw", "ok"),
                          ("mpich-tcp", "latency", "ok"), ("mpich-tcp", "bw", "ok")])
        progress = [l for l in self.result.stdout.splitlines() if " run 1/1 " in l]
        self.assertEqual(len(progress), 4, self.result.stdout)
        for line in progress:
            self.assertRegex(line, r"^\[\d/4 ~\d+:\d\d left\] run 1/1 mpich-\S+ +\S+ +ok +"
                                   r"[0-9.]+ s  \(11 sizes\)$")

    def test_results_give_diwarps_ratio_at_every_size(self):
        md = self.read("results.md")
        for mode in ("latency", "bw"):
            with self.subTest(mode=mode):
                table = md.split(f"## {mode} (", 1)[1].split("\n## ", 1)[0]
                lines = [l for l in table.splitlines() if l.startswith("|")]
                head = [c.strip() for c in lines[0].strip("|").split("|")]
                self.assertEqual(head, ["size", "mpich-diwarp", "mpich-tcp",
                                        "mpich-diwarp ÷ mpich-tcp"])
                rows = [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]
                self.assertEqual([int(r[0]) for r in rows], SIZES)
                for r in rows:
                    for cell in r[1:]:
                        self.assertRegex(cell, r"^\d+(\.\d+)?( ±\d+%)?$", r)
        self.assertIn("## Launch lines", md)
        raw = list(csv.DictReader(self.read("raw.csv").splitlines()))
        self.assertEqual(len(raw), 2 * 2 * len(SIZES))


if __name__ == "__main__":
    unittest.main()
