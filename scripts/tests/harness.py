"""What the end-to-end tests of the benchmark subcommands share: the diwarp command, built
with the provider, and a run of it with the environment a transport's name must not see."""
import os
import subprocess

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_diwarp():
    """scripts/build-provider, then the path of the diwarp command beside the provider."""
    r = subprocess.run([os.path.join(HERE, "scripts/build-provider")], capture_output=True,
                       text=True, timeout=1800)
    if r.returncode != 0:
        raise AssertionError(f"scripts/build-provider failed:\n{r.stderr[-3000:]}")
    return os.path.join(r.stdout.strip(), "..", "diwarp")


def run_clean(args, timeout=300):
    """Runs `args` without the caller's FI_DIWARP_*/MPIRUN_DIWARP_* settings: a transport's
    name chooses them, whatever the caller's shell holds."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FI_DIWARP_", "MPIRUN_DIWARP_"))}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
