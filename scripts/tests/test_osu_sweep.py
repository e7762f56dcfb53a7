"""`diwarp osu-sweep` end to end over a fake OSU build: small shell scripts named like OSU's
benchmarks (made here, in a temporary directory), launched through `diwarp run` like the real
ones. One passes, one fails its validation over diwarp only, one fails over the peer too, one
takes no options. The table, the summary, the failures below it and the exit status must say
so."""
import os
import re
import shutil
import tempfile
import unittest

from harness import build_diwarp, run_clean

HELP = """Usage: osu_x [options]
  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size
  -x, --warmup              ITER - set number of warmup iterations
  -i, --iterations          ITER - number of iterations for timing
  -c, --validation          [log:<dir>]Enable validation. Disabled by default.
"""

# Every script prints its arguments, so the test sees what the sweep gave it.
FAKES = {
    # Passes everywhere, with OSU's validation column.
    "pt2pt/standard/osu_bw": f"""[ "$1" = -h ] && {{ cat <<'H'
{HELP}H
exit 0; }}
echo "# args: $*"
echo "# Size      Bandwidth (MB/s)        Validation"
echo "1                       1.00              Pass"
""",
    # OSU's validation fails over diwarp only (the launch itself succeeds).
    "pt2pt/standard/osu_latency": f"""[ "$1" = -h ] && {{ cat <<'H'
{HELP}H
exit 0; }}
echo "# args: $*"
v=Pass; [ "$FI_PROVIDER" = diwarp ] && v=Fail
echo "1                       2.50              $v"
""",
    # Fails everywhere; the peer must get MPICH's RMA off.
    "one-sided/osu_put_latency": """[ "$1" = -h ] && { echo "Usage: osu_put_latency"; exit 0; }
echo "# RMA: ${MPIR_CVAR_CH4_OFI_ENABLE_RMA:-on}"
echo "put failed: Error 5" >&2
exit 3
""",
    # Takes no options at all.
    "startup/osu_init": """[ "$1" = -h ] && { echo "Usage: osu_init"; exit 0; }
echo "# args: [$*]"
""",
}


class OsuSweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.diwarp = build_diwarp()
        cls.tmp = tempfile.mkdtemp(prefix="diwarp-osu-sweep-")
        cls.osu = os.path.join(cls.tmp, "mpi")
        for path, body in FAKES.items():
            p = os.path.join(cls.osu, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write("#!/bin/sh\n" + body)
            os.chmod(p, 0o755)
        with open(os.path.join(cls.osu, "pt2pt/standard/osu_bw.c"), "w") as f:
            f.write("not a benchmark\n")
        os.chmod(os.path.join(cls.osu, "pt2pt/standard/osu_bw.c"), 0o755)
        cls.out = os.path.join(cls.tmp, "table.md")
        cls.result = run_clean([cls.diwarp, "osu-sweep", "--osu", cls.osu, "--max-size", "64",
                                "--iters", "5", "--timeout", "60", "--out", cls.out])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_table_and_exit_status(self):
        r = self.result
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(self.out) as f:
            table = f.read()
        self.assertTrue(r.stdout.startswith(table), r.stdout)
        # The seconds vary: each must be a number.
        self.assertEqual(re.sub(r"(?m) \| \d+ \|$", " | S |", table), (
            "OSU sweep over diwarp: mpich (mpich-diwarp: hybrid (default)), `-m 1:64 -i 5`, "
            "point-to-point on 2 ranks, collectives on 4\n"
            "\n"
            "| benchmark | ranks | validated | mpich-diwarp | seconds |\n"
            "|---|---:|---|---|---:|\n"
            "| `one-sided/osu_put_latency` | 2 | no | fails on mpich-tcp (RMA off, as over "
            "diwarp) too (exit 3) | S |\n"
            "| `pt2pt/standard/osu_bw` | 2 | yes | pass | S |\n"
            "| `pt2pt/standard/osu_latency` | 2 | yes | FAIL (diwarp only, exit 97) | S |\n"
            "| `startup/osu_init` | 2 | no | pass | S |\n"
            "\n"
            "mpich-diwarp: 2 passed, 1 failed over diwarp only, 1 failed over mpich-tcp as well "
            "(of 4).\n"))

    def test_failures_below_the_table_and_what_each_run_got(self):
        below = self.result.stdout.split("(of 4).\n", 1)[1]
        blocks = below.split("\n--- ")[1:]
        self.assertEqual([b.split(" (log: ")[0] for b in blocks],
                         ["one-sided/osu_put_latency over mpich-diwarp",
                          "pt2pt/standard/osu_latency over mpich-diwarp"])
        self.assertIn("\n    put failed: Error 5", blocks[0])
        self.assertIn("2.50              Fail", blocks[1])
        logs = os.path.dirname(blocks[0].split(" (log: ")[1].split(")")[0])
        try:
            def read(name):
                with open(os.path.join(logs, name)) as f:
                    return f.read()
            self.assertIn("# args: -m 1:64 -i 5 -x 3 -c",
                          read("pt2pt_standard_osu_bw.mpich-diwarp.log"))
            self.assertIn("# args: []", read("startup_osu_init.mpich-diwarp.log"))
            self.assertIn("# RMA: 0", read("one-sided_osu_put_latency.mpich-tcp.log"))
            self.assertIn("# RMA: on", read("one-sided_osu_put_latency.mpich-diwarp.log"))
            self.assertIn("Pass", read("pt2pt_standard_osu_latency.mpich-tcp.log"))
            self.assertFalse(os.path.exists(os.path.join(logs, "pt2pt_standard_osu_bw.mpich-tcp.log")),
                             "the peer runs only what failed")
        finally:
            shutil.rmtree(logs, ignore_errors=True)

    def test_progress_lines(self):
        lines = [l for l in self.result.stderr.splitlines() if l.startswith("[")]
        self.assertEqual(len(lines), 4, self.result.stderr)
        self.assertRegex(lines[2], r"^\[3/4 ~\d+:\d\d left\] pt2pt/standard/osu_latency +np=2 "
                                   r"mpich-diwarp +FAIL \(diwarp only, exit 97\) \(\d+s\)$")

    def test_usage_errors(self):
        for args, msg in [([], "--osu DIR is required"),
                          (["--osu", self.osu, "--transports", "mpich-tcp"], "is not diwarp"),
                          (["--osu", self.osu, "--transports", "mpich-diwarp,ompi-diwarp"],
                           "one MPI per sweep"),
                          (["--osu", self.osu, "--mpi", "impi"], "--mpi is mpich or openmpi"),
                          (["--osu", self.osu, "--only", "nothing-matches"], "no osu_* executables")]:
            with self.subTest(args=args):
                r = run_clean([self.diwarp, "osu-sweep"] + args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(msg, r.stderr)


if __name__ == "__main__":
    unittest.main()
