"""The multirail test bed: scripts/netns-hosts' arguments (its dry run: the rails, addresses and
token buckets it would make), scripts/netns-env's entries, and, where network namespaces can
be made (root), two hosts with two shaped rails that carry their rate each and twice it at once,
settings applied per host, and a rail's end taken down and up."""
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTS = os.path.join(HERE, "scripts/netns-hosts")
ENV = os.path.join(HERE, "scripts/netns-env")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netrate  # noqa: E402


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def dry(*args):
    r = run([HOSTS, "up", *args, "--dry-run"])
    return r.returncode, r.stdout.splitlines(), r.stderr


class Arguments(unittest.TestCase):
    def test_default_is_one_unshaped_rail_on_the_old_addresses(self):
        rc, lines, _ = dry()
        self.assertEqual(rc, 0)
        self.assertEqual(lines, ["dw0: dwb-a 10.232.0.1/24 <-> dwb-b 10.232.0.2/24, MTU 1500, unshaped"])

    def test_rails_get_a_subnet_each_and_one_rate_applies_to_all(self):
        rc, lines, _ = dry("dwt", "9000", "--rails", "3", "--rate", "1gbit")
        self.assertEqual(rc, 0)
        self.assertEqual(len(lines), 3)
        for i, line in enumerate(lines):
            self.assertTrue(line.startswith(f"dw{i}: dwt-a 10.232.{i}.1/24 <-> dwt-b 10.232.{i}.2/24, MTU 9000"), line)
            self.assertIn("shaped to 1gbit each way (tbf burst 125000 B, latency 5ms)", line)

    def test_a_rate_per_rail_and_the_burst_follows_the_rate(self):
        rc, lines, _ = dry("--rails=3", "--rate=10gbit,500mbit,2gbit", "dwt")
        self.assertEqual(rc, 0)
        self.assertIn("shaped to 10gbit each way (tbf burst 1250000 B", lines[0])
        # Under 64 KiB a GSO packet would not fit the bucket.
        self.assertIn("shaped to 500mbit each way (tbf burst 65536 B", lines[1])
        self.assertIn("shaped to 2gbit each way (tbf burst 250000 B", lines[2])

    def test_the_queue_length_can_be_chosen(self):
        r = run([HOSTS, "up", "--rate", "1gbit", "--dry-run"], env=dict(os.environ, NETNS_TBF_LATENCY="20ms"))
        self.assertIn("latency 20ms", r.stdout)

    def test_bad_arguments_print_the_usage_or_say_what_is_wrong(self):
        for args, why in ((["--rails", "2", "--rate", "1gbit,2gbit,3gbit"], "one per rail (2), not 3"),
                          (["--rate", "1gibit"], "not a rate: '1gibit'"),
                          (["--rate", "1kbit"], "not a rate"),
                          (["--rails", "0"], "1 to 16, not 0"),
                          (["--rails", "17"], "1 to 16, not 17"),
                          (["--rails", "x"], "1 to 16, not x"),
                          (["dwt", "68x"], "not an MTU: 68x"),
                          (["bad/name"], "not a namespace name")):
            with self.subTest(args=args):
                rc, _, err = dry(*args)
                self.assertEqual(rc, 2)
                self.assertIn(why, err)
        for args in (["up", "a", "1500", "extra"], ["up", "--rails"], ["up", "--bogus"],
                     ["down", "dwt", "--rails", "2"], ["down", "a", "b"], ["sideways"], []):
            with self.subTest(args=args):
                r = run([HOSTS, *args])
                self.assertEqual(r.returncode, 2)
                self.assertIn("Usage: scripts/netns-hosts up [NAME] [MTU] [--rails N]", r.stdout)


class EnvEntries(unittest.TestCase):
    def check(self, spec):
        return run([ENV, "--check"], env=dict(os.environ, MPIRUN_DIWARP_NETNS_ENV=spec))

    def test_malformed_entries_are_refused(self):
        for spec, why in (("nocolon", "is not NS:NAME=VALUE"), (":X=1", "is not NS:NAME=VALUE"),
                          ("ns:", "is not NS:NAME=VALUE"), ("ns:1X=2", "is not a variable name"),
                          ("ns:A-B=2", "is not a variable name")):
            with self.subTest(spec=spec):
                r = self.check(spec)
                self.assertEqual(r.returncode, 2)
                self.assertIn(why, r.stderr)

    def test_a_namespace_that_does_not_exist_is_refused(self):
        r = self.check("no-such-namespace-here:FI_DIWARP_IFACE=dw0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no network namespace 'no-such-namespace-here'", r.stderr)

    def test_outside_any_named_namespace_nothing_applies(self):
        env = dict(os.environ, MPIRUN_DIWARP_NETNS_ENV="elsewhere:X=1", X="mine")
        r = run([ENV, "sh", "-c", 'echo "$X"'], env=env)
        self.assertEqual((r.returncode, r.stdout), (0, "mine\n"))


def can_make_namespaces():
    name = f"dwrt{os.getpid()}-probe"
    if run(["ip", "netns", "add", name]).returncode != 0:
        return False
    run(["ip", "netns", "del", name])
    return True


@unittest.skipUnless(os.geteuid() == 0 and can_make_namespaces(), "needs root (network namespaces)")
class Bed(unittest.TestCase):
    # Low enough that the measuring program, not the shaper, is never the bottleneck, even with
    # both cores busy: the test is of the shaping.
    RATE = 100_000_000

    @classmethod
    def setUpClass(cls):
        cls.name = f"dwrt{os.getpid()}"
        r = run([HOSTS, "up", cls.name, "--rails", "2", "--rate", "100mbit"])
        if r.returncode != 0:
            raise AssertionError(f"netns-hosts up failed:\n{r.stdout}\n{r.stderr}")

    @classmethod
    def tearDownClass(cls):
        run([HOSTS, "down", cls.name])

    def ns(self, side):
        return f"{self.name}-{side}"

    def test_a_rail_carries_its_rate_and_two_carry_twice_it(self):
        # TCP over a 1514-byte frame carries 1448 bytes: at most 95.6 % of the rate.
        one = netrate.measure(self.ns("a"), self.ns("b"), ["10.232.1.2"], seconds=1.5)
        rate = one[0]["bits_per_second"]
        self.assertEqual(one[0]["iface"], "dw1")
        self.assertGreater(rate, 0.8 * self.RATE, one)
        self.assertLess(rate, 1.0 * self.RATE, one)
        both = netrate.measure(self.ns("b"), self.ns("a"), ["10.232.0.1", "10.232.1.1"], seconds=1.5)
        total = sum(r["bits_per_second"] for r in both)
        self.assertGreater(total, 1.6 * self.RATE, both)
        self.assertLess(total, 2.0 * self.RATE, both)

    def test_settings_apply_to_the_ranks_of_their_host_only(self):
        spec = f"{self.ns('a')}:FI_DIWARP_IFACE=dw0,dw1;{self.ns('b')}:FI_DIWARP_IFACE=dw0;{self.ns('b')}:X"
        env = dict(os.environ, MPIRUN_DIWARP_NETNS_ENV=spec, FI_DIWARP_IFACE="global", X="kept")
        self.assertEqual(run([ENV, "--check"], env=env).returncode, 0)
        show = [ENV, "sh", "-c", 'echo "$FI_DIWARP_IFACE ${X-unset}"']
        a = run(["ip", "netns", "exec", self.ns("a"), *show], env=env)
        b = run(["ip", "netns", "exec", self.ns("b"), *show], env=env)
        self.assertEqual(a.stdout, "dw0,dw1 kept\n")
        self.assertEqual(b.stdout, "dw0 unset\n")

    def test_one_end_down_takes_the_carrier_from_the_other(self):
        def flags(side):
            return run(["ip", "-n", self.ns(side), "-o", "link", "show", "dw1"]).stdout
        helper = os.path.join(HERE, "scripts/netns.sh")
        try:
            r = run(["bash", "-c", f'source {helper} && netns_link_set {self.ns("a")} dw1 down'])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("state DOWN", flags("a"))
            self.assertIn("NO-CARRIER", flags("b"))
        finally:
            run(["bash", "-c", f'source {helper} && netns_link_set {self.ns("a")} dw1 up'])
        for _ in range(50):  # the carrier comes back within a few ms
            if "NO-CARRIER" not in flags("b"):
                break
            time.sleep(0.02)
        self.assertNotIn("NO-CARRIER", flags("b"))
        self.assertIn("tbf", run(["tc", "-n", self.ns("a"), "qdisc", "show", "dev", "dw1"]).stdout)


if __name__ == "__main__":
    unittest.main()
