"""`diwarp fi-bench` end to end, briefly: one run of fi-pingpong at 1 B and 1 KiB over diwarp,
tcp;ofi_rxm and udp;ofi_rxd. It must exit 0, write diwarp's runs to the CSV, and print diwarp's
medians and its ratios to both peers as numbers at both sizes."""
import csv
import os
import re
import shutil
import tempfile
import unittest

from harness import build_diwarp, run_clean

PEERS = ["tcp;ofi_rxm", "udp;ofi_rxd"]


class FiBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.diwarp = build_diwarp()
        cls.tmp = tempfile.mkdtemp(prefix="diwarp-fi-bench-")
        cls.csv = os.path.join(cls.tmp, "results.csv")
        cls.result = run_clean([cls.diwarp, "fi-bench", "--runs", "1", "--sizes", "1,1K",
                                "--out", cls.csv])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_exits_0_with_diwarps_runs_in_the_csv(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout + self.result.stderr)
        with open(self.csv) as f:
            rows = list(csv.DictReader(f))
        diwarp = [(r["size"], r["run"]) for r in rows if r["provider"] == "diwarp"]
        self.assertEqual(diwarp, [("1", "1"), ("1024", "1")])
        for r in rows:
            self.assertRegex(r["latency_us"], r"^\d+\.\d\d$", r)
        progress = [l for l in self.result.stderr.splitlines() if " run 1/1 diwarp " in l]
        self.assertEqual(len(progress), 2, self.result.stderr)
        for line in progress:
            self.assertRegex(line, r"^\[\d/6 ~\d+:\d\d left\] run 1/1 diwarp +\d+ B +[0-9.]+ us$")

    def test_table_gives_diwarps_medians_and_ratios(self):
        lines = [l for l in self.result.stdout.splitlines() if l.startswith("|")]
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        self.assertEqual(head, ["size (B)", "diwarp (us)"] + [f"{p} (us)" for p in PEERS]
                         + [f"diwarp ÷ {p}" for p in PEERS])
        rows = [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]
        self.assertEqual([r[0] for r in rows], ["1", "1024"])
        for r in rows:
            # diwarp's own cells must be numbers; a peer this machine cannot run says "failed"
            # and its ratio "–", as the shell harness did.
            self.assertRegex(r[1], r"^\d+\.\d\d$", r)
            for peer, ratio in zip(r[2:4], r[4:6]):
                if peer == "failed":
                    self.assertEqual(ratio, "–", r)
                else:
                    self.assertRegex(peer, r"^\d+\.\d\d$", r)
                    self.assertRegex(ratio, r"^\d+\.\d\d$", r)
        self.assertTrue(re.search(r"medians of the runs; CSV: " + re.escape(self.csv) + "$",
                                  self.result.stdout.rstrip()), self.result.stdout)


if __name__ == "__main__":
    unittest.main()
