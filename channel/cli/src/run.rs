//! `diwarp run`: one MPI launch under a timeout after which no process of the run survives.
//!
//! The launcher leads a session of its own (`setsid`) and every process started for the run
//! carries a run id in its environment. On timeout, on SIGINT/SIGTERM/SIGHUP, and after the
//! launcher exits, every process of that session, every descendant of the launcher and every
//! process carrying the run id is ended ([`crate::procs`]). Exit status: the launcher's, 124 on
//! timeout, 128 + the signal when interrupted, 2 on usage errors.

use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;

use crate::hostfile::Cluster;
use crate::launch::{self, Hosts, Mode, Mpi, Transport, RUN_ID_VAR};
use crate::{job_key, mpiexec, procs, provider, shell};

#[derive(Args)]
pub struct RunArgs {
    /// The MPI whose launcher starts the ranks.
    #[arg(long, value_enum, env = "MPIRUN_DIWARP_MPI", default_value = "mpich")]
    mpi: Mpi,
    /// diwarp, or a peer transport to compare with.
    #[arg(
        long,
        value_enum,
        env = "MPIRUN_DIWARP_TRANSPORT",
        default_value = "diwarp"
    )]
    transport: Transport,
    /// diwarp's paths (FI_DIWARP_MODE); default: the caller's FI_DIWARP_MODE, else the
    /// provider's (hybrid). Every FI_DIWARP_* variable set by the caller reaches the ranks.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Number of ranks (oversubscribed when more than the cores).
    #[arg(short = 'n', long = "np", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    np: u32,
    /// Seconds before every process of the run is killed (exit status 124).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The directory of libdiwarp-fi.so (default: installed beside this command, or the
    /// build tree's).
    #[arg(long, env = "DIWARP_PROVIDER_DIR")]
    provider_dir: Option<PathBuf>,
    /// An extra launcher argument (repeatable), e.g. --mpi-arg=-genv --mpi-arg=FOO=1.
    #[arg(long = "mpi-arg", allow_hyphen_values = true)]
    mpi_arg: Vec<String>,
    /// Several hosts on one machine: network namespaces, each named by its first global IPv4
    /// address; ranks go round-robin over them. Needs the checkout's scripts/netns-launch.
    #[arg(long, env = "MPIRUN_DIWARP_NETNS", value_delimiter = ',')]
    netns: Vec<String>,
    /// Authenticated mode with a fresh random key for this job (FI_DIWARP_AUTH=on,
    /// FI_DIWARP_AUTH_KEY), unless the caller set a key or key file, which is kept.
    #[arg(long)]
    auth: bool,
    /// Hosts of a cluster, comma-separated (host or host:SLOTS), given to the MPI's launcher
    /// as it takes them (Hydra: -hosts; Open MPI: --host); it starts the remote ranks with
    /// its own means (ssh). The provider binds each host's default interface unless
    /// FI_DIWARP_IFACE is set.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["netns", "hostfile"])]
    hosts: Vec<String>,
    /// A file of hosts, one a line (host, host:SLOTS or host slots=SLOTS; # comments), given
    /// to the launcher as a file where it reads that form (Hydra: -f; Open MPI: --hostfile),
    /// else as the same host list.
    #[arg(long, value_name = "FILE", conflicts_with = "netns")]
    hostfile: Option<PathBuf>,
    /// Print the environment and command; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the environment and command to stderr, then run.
    #[arg(short, long)]
    verbose: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    program: Vec<String>,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("diwarp run: {msg}");
    ExitCode::from(2)
}

/// The first global IPv4 address of namespace `ns`.
fn netns_addr(ns: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["-n", ns, "-4", "-o", "addr", "show", "scope", "global"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = text.lines().next()?.split_whitespace().nth(3)?;
    Some(field.split('/').next()?.to_owned())
}

fn hosts(namespaces: &[String]) -> Result<Option<Hosts>, String> {
    if namespaces.is_empty() {
        return Ok(None);
    }
    let agent = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/netns-launch"
    ));
    if !agent.is_file() {
        return Err(format!(
            "--netns needs {}, the checkout's ssh stand-in",
            agent.display()
        ));
    }
    let mut addrs = Vec::new();
    for ns in namespaces {
        addrs.push(netns_addr(ns).ok_or_else(|| {
            format!("network namespace '{ns}' does not exist or has no global IPv4 address")
        })?);
    }
    Ok(Some(Hosts {
        namespaces: namespaces.to_vec(),
        addrs,
        agent,
    }))
}

/// The cluster `--hosts` or `--hostfile` names, if either does.
fn cluster(a: &RunArgs) -> Result<Option<Cluster>, String> {
    match (&a.hostfile, a.hosts.is_empty()) {
        (Some(f), _) => Cluster::from_file(f).map(Some),
        (None, false) => Cluster::from_list(&a.hosts).map(Some),
        (None, true) => Ok(None),
    }
}

pub fn main(a: RunArgs) -> ExitCode {
    let hosts = match hosts(&a.netns) {
        Ok(h) => h,
        Err(e) => return usage(&e),
    };
    let cluster = match cluster(&a) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let mpiexec = match mpiexec::find(a.mpi) {
        Ok(p) => p,
        Err(e) => return usage(&e),
    };
    let provider = if a.transport == Transport::Diwarp {
        match provider::locate(a.provider_dir.as_deref()) {
            Ok(f) => Some(f.dir),
            Err(e) => return usage(&e),
        }
    } else {
        None
    };
    // The caller's environment as far as the plan reads it (names and values in UTF-8; a
    // variable that is not is passed on untouched by the launcher, just not looked at).
    let mut caller: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if a.auth {
        if let Err(e) = job_key::add_fresh(&mut caller) {
            return usage(&e);
        }
    }
    let req = launch::Request {
        mpi: a.mpi,
        transport: a.transport,
        mode: a.mode,
        np: a.np,
        mpiexec: &mpiexec,
        provider_dir: provider.as_deref(),
        hosts: hosts.as_ref(),
        cluster: cluster.as_ref(),
        extra: &a.mpi_arg,
        program: &a.program,
    };
    let plan = match launch::plan(&req, &caller) {
        Ok(p) => p,
        Err(e) => return usage(&e),
    };
    if a.dry_run || a.verbose {
        let env: Vec<String> = plan.env.iter().map(|(k, v)| job_key::shown(k, v)).collect();
        eprintln!(
            "# timeout {} s, then every process of the run is killed\nenv {} \\\n   {}",
            a.timeout,
            shell::join(&env),
            shell::join(&plan.argv)
        );
        if a.dry_run {
            return ExitCode::SUCCESS;
        }
    }
    supervise(&plan, Duration::from_secs(a.timeout), &a.program)
}

fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("diwarp-run-{}-{nanos}", std::process::id())
}

fn supervise(plan: &launch::Plan, timeout: Duration, program: &[String]) -> ExitCode {
    let signal = Arc::new(AtomicUsize::new(0));
    for s in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register_usize(s, Arc::clone(&signal), s as usize) {
            eprintln!("diwarp run: cannot catch signal {s}: {e}");
        }
    }
    let id = run_id();
    // setsid: the launcher leads a new session (our child is no group leader, so setsid execs
    // in place and the child's pid is the launcher's). Rank 0 gets our stdin when it is a pipe
    // or a file, as both launchers pass it on; never a terminal.
    let mut cmd = Command::new("setsid");
    cmd.args(&plan.argv)
        .envs(plan.env.iter().cloned())
        .envs(plan.launcher_env.iter().cloned())
        .env(RUN_ID_VAR, &id);
    if std::io::stdin().is_terminal() {
        cmd.stdin(Stdio::null());
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("diwarp run: cannot start {}: {e}", plan.argv[0]);
            return ExitCode::from(127);
        }
    };
    let launcher = child.id() as i32;
    // A timeout beyond what the clock can add never comes.
    let deadline = Instant::now().checked_add(timeout);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                eprintln!("diwarp run: waiting for the launcher: {e}");
                procs::end_run("lost the launcher", launcher, RUN_ID_VAR, &id);
                return ExitCode::FAILURE;
            }
        }
        let s = signal.load(Ordering::Relaxed);
        if s != 0 {
            procs::end_run(
                &format!("interrupted (signal {s})"),
                launcher,
                RUN_ID_VAR,
                &id,
            );
            let _ = child.wait();
            return ExitCode::from(128 + s as u8);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            eprintln!(
                "diwarp run: TIMEOUT after {}s: {}",
                timeout.as_secs(),
                program.join(" ")
            );
            procs::end_run("timeout", launcher, RUN_ID_VAR, &id);
            let _ = child.wait();
            return ExitCode::from(124);
        }
        sleep(Duration::from_millis(10));
    };
    let rc = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    // The launcher is gone; a rank it failed to reap must not outlive the run.
    procs::end_run(
        &format!("launcher exited (status {rc}) but left processes behind"),
        launcher,
        RUN_ID_VAR,
        &id,
    );
    ExitCode::from(rc.clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, String> {
        let argv = std::iter::once("run").chain(args.iter().copied());
        Cli::try_parse_from(argv)
            .map(|c| c.run)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn hosts_come_from_one_place_only() {
        let a = parse(&["--hosts", "a,b:2", "./x"]).unwrap();
        assert_eq!(a.hosts, ["a", "b:2"]);
        let c = cluster(&a).unwrap().unwrap();
        assert_eq!(c.hosts.len(), 2);
        for bad in [
            &["--hosts", "a,b", "--netns", "n1,n2", "./x"][..],
            &["--hosts", "a", "--hostfile", "/f", "./x"],
            &["--hostfile", "/f", "--netns", "n1", "./x"],
        ] {
            let e = parse(bad).err().expect("refused");
            assert!(e.contains("cannot be used with"), "{bad:?}: {e}");
        }
        let a = parse(&["--hostfile", "/no/such/file", "./x"]).unwrap();
        let e = cluster(&a).unwrap_err();
        assert!(e.contains("/no/such/file: cannot read it"), "{e}");
        let a = parse(&["--hosts", "a,,b", "./x"]).unwrap();
        assert!(cluster(&a).unwrap_err().contains("an empty host name"));
        assert!(cluster(&parse(&["./x"]).unwrap()).unwrap().is_none());
    }
}
