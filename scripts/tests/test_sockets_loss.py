"""libdiwarp-sockets.so's datagram switch under loss, and a switched datagram socket between
the program's calls: two programs switch a connected UDP pair in a network namespace whose
nftables rules drop datagrams on input or on output (a send then fails with EPERM), each
single datagram of the exchange in turn and a seeded 10 % draw; retransmissions move while
the program computes; blocked calls honour SA_RESTART and successful calls leave errno."""
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from test_sockets import HERE, LIB, free_udp_port

NETNS = os.path.join(HERE, "scripts", "netns.sh")


def build(tmp, name):
    prog = os.path.join(tmp, f"sockets-{name}")
    src = os.path.join(HERE, "iwarp/sockets/tests/c")
    r = subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror",
                        "-I", os.path.join(HERE, "iwarp/sockets/include"), "-I", src,
                        "-o", prog, os.path.join(src, f"{name}.c")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"{name}.c does not build:\n{r.stderr}")
    return prog


def sh(script):
    return subprocess.run(["bash", "-c", f"source {NETNS}; {script}"], capture_output=True,
                          text=True, timeout=60)


class Pair:
    """Two programs, b started first, in namespace `ns` (None: here)."""

    @staticmethod
    def run(prog, phase, ns=None, env_a=None, timeout=60):
        pa, pb = free_udp_port(), free_udp_port()
        pre = ["ip", "netns", "exec", ns] if ns else []
        env = dict(os.environ, LD_PRELOAD=LIB, DIWARP_SWITCH_TIMEOUT_MS="2000")
        env.pop("DIWARP_FAULTS", None)
        b = subprocess.Popen(pre + [prog, "b", str(pb), str(pa), phase], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            a = subprocess.run(pre + [prog, "a", str(pa), str(pb), phase],
                               env=dict(env, **(env_a or {})), capture_output=True, text=True,
                               timeout=timeout)
            b_out, b_err = b.communicate(timeout=timeout)
        finally:
            b.kill()
        return (a.returncode, a.stdout + a.stderr), (b.returncode, b_out + b_err)


class SocketsLoss(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        r = subprocess.run(["cargo", "build", "--release", "-q", "-p", "diwarp-sockets"],
                           cwd=HERE, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise AssertionError(f"cargo build failed:\n{r.stderr}")
        cls.tmp = tempfile.mkdtemp(prefix="diwarp-sockets-loss-")
        cls.dgram = build(cls.tmp, "dgram")
        cls.life = build(cls.tmp, "dgram_life")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assert_both_ok(self, res, what):
        for code, out in res:
            self.assertEqual(code, 0, f"{what}:\n{res}")
            self.assertIn("OK switched=1", out, f"{what}:\n{res}")

    def test_retransmissions_move_while_the_program_computes(self):
        # a drops 30 % of what it sends (seeded), then computes for 3 s in no call.
        res = Pair.run(self.life, "sleep", env_a={"DIWARP_FAULTS": "drop=0.3,seed=2"})
        self.assert_both_ok(res, "sleep")

    def test_blocked_calls_honour_sa_restart_and_errno_stays(self):
        res = Pair.run(self.life, "restart")
        self.assert_both_ok(res, "restart")

    def netns(self):
        if os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("ip") is None:
            raise unittest.SkipTest("needs root, ip and nft")
        ns = f"dws-loss-{os.getpid()}"
        if sh(f"netns_make {ns}").returncode != 0:
            raise unittest.SkipTest("cannot make a network namespace")
        self.addCleanup(lambda: subprocess.run(["ip", "netns", "del", ns]))
        return ns

    def switch_under(self, ns, hook, modulo, dropped, what):
        r = sh(f"nft_clear {ns}; nft_drop_udp_at {ns} {hook} {modulo} '{dropped}'")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = Pair.run(self.dgram, "iwarp", ns=ns)
        self.assert_both_ok(res, f"{what}, dropped on {hook}")

    def test_the_switch_survives_any_single_lost_datagram_on_input_or_output(self):
        ns = self.netns()
        for hook in ("input", "output"):
            # The hellos and their answers are the first datagrams through either hook.
            for n in range(6):
                self.switch_under(ns, hook, 1 << 30, n, f"datagram {n}")

    def test_the_switch_survives_seeded_ten_percent_loss_on_input_or_output(self):
        ns = self.netns()
        for hook in ("input", "output"):
            for seed in (1, 2, 3):
                dropped = ", ".join(map(str, sorted(random.Random(seed).sample(range(100), 10))))
                self.switch_under(ns, hook, 100, dropped, f"seed {seed}")


if __name__ == "__main__":
    unittest.main()
