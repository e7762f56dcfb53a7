"""The front door stays honest: README's two commands are the ones CI and the main job run, every
relative link in the repository's Markdown resolves, and no document points outside the
repository."""
import os
import re
import subprocess
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# BENCHMARKS.md holds current results under their commands: no "session N" diary, and no address
# outside the repository but a package registry's.
SESSION = re.compile(r"\bsession\s+\d+", re.IGNORECASE)
URL = re.compile(r"\bhttps?://([^/\s)>\]`'\"]+)", re.IGNORECASE)
REGISTRIES = ("crates.io", "docs.rs", "pypi.org", "files.pythonhosted.org", "static.crates.io",
              "index.crates.io", "proxy.golang.org", "registry.npmjs.org")


def read(path):
    with open(path) as f:
        return f.read()


def benchmark_problems(text):
    """What in a BENCHMARKS.md text breaks the rule: "session N" and addresses outside the
    repository that are not a package registry's. Each as (line number, finding)."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        found += [(n, m.group(0)) for m in SESSION.finditer(line)]
        found += [(n, m.group(0).rstrip(".,;:")) for m in URL.finditer(line)
                  if m.group(1).lower().rstrip(".,;:") not in REGISTRIES]
    return found


def markdown_files():
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=HERE, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if f]


class Docs(unittest.TestCase):
    def test_readme_commands_are_what_ci_and_the_main_job_run(self):
        readme = read(os.path.join(HERE, "README.md"))
        block = readme.split("```sh", 1)[1].split("```", 1)[0]
        commands = [l.split("#")[0].strip() for l in block.strip().splitlines()]
        self.assertEqual(commands, ["scripts/bench", "scripts/test"])
        ci = read(os.path.join(HERE, ".ci/run"))
        self.assertIn("exec scripts/test", ci)
        bench = read(os.path.join(HERE, "scripts/bench"))
        self.assertIn("exec scripts/mpi-bench", bench, "the main job is the MPI benchmark")
        wrapper = read(os.path.join(HERE, "scripts/mpi-bench"))
        self.assertRegex(wrapper, r'(?m)^DIWARP_BENCH_COMMAND=scripts/mpi-bench exec "\$dir/\.\./diwarp" bench "\$@"$',
                         "scripts/mpi-bench runs diwarp bench, the command just built")
        for script, sub in (("mem-bench", "mem-bench"), ("fi-bench", "fi-bench"),
                            ("osu-sweep", "osu-sweep")):
            wrapper = read(os.path.join(HERE, "scripts", script))
            self.assertRegex(wrapper, rf'(?m)^DIWARP_BENCH_COMMAND=scripts/{script} exec "\$dir/\.\./diwarp" {sub} "\$@"$',
                             f"scripts/{script} runs diwarp {sub}, the command just built")
        for c in commands:
            self.assertTrue(os.access(os.path.join(HERE, c), os.X_OK), c)

    def test_relative_links_resolve(self):
        for md in markdown_files():
            text = read(os.path.join(HERE, md))
            for target in LINK.findall(text):
                if target.startswith(("#", "mailto:")):
                    continue
                with self.subTest(md=md, link=target):
                    self.assertFalse(re.match(r"^[a-z]+://", target), "links outside the repository")
                    path = os.path.normpath(os.path.join(os.path.dirname(os.path.join(HERE, md)),
                                                         target.split("#")[0]))
                    self.assertTrue(path.startswith(HERE + os.sep), "points outside the repository")
                    self.assertTrue(os.path.exists(path), "does not exist")

    def test_no_document_relies_on_files_outside_the_repository(self):
        for md in markdown_files():
            text = read(os.path.join(HERE, md))
            with self.subTest(md=md):
                self.assertNotIn("../shared", text)

    def test_benchmarks_hold_no_sessions_and_no_outside_addresses(self):
        benchmarks = [f for f in markdown_files() if os.path.basename(f) == "BENCHMARKS.md"]
        self.assertTrue(benchmarks)
        for md in benchmarks:
            with self.subTest(md=md):
                self.assertEqual(benchmark_problems(read(os.path.join(HERE, md))), [])

    def test_the_benchmark_check_can_fail(self):
        sample = ("Measured in session 12, as Session 4 did.\n"
                  "See https://github.com/ofiwg/libfabric/issues/1 and http://example.org.\n"
                  "The crate is on https://crates.io/crates/crc32c; a session's 3 timers.\n")
        self.assertEqual(benchmark_problems(sample),
                         [(1, "session 12"), (1, "Session 4"), (2, "https://github.com"),
                          (2, "http://example.org")])


if __name__ == "__main__":
    unittest.main()
