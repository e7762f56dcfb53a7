"""The front door stays honest: README's two commands are the ones CI and the main job run, every
relative link in the repository's Markdown resolves, and no document points outside the
repository."""
import os
import re
import subprocess
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def read(path):
    with open(path) as f:
        return f.read()


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


if __name__ == "__main__":
    unittest.main()
