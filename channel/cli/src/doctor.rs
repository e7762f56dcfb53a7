//! `diwarp doctor`: checks one host, or several, before a job, and prints one line per
//! finding with what to change. On several hosts the MPI's launcher starts one agent a host
//! (`diwarp doctor --agent`, as `diwarp run` would start ranks); the agents report to this
//! process over TCP, probe each other's UDP and TCP ports with a hello of their own, and
//! report what went through.

mod agent;
mod checks;
mod wire;

use std::io::BufReader;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use diwarp_fi::params::EnvParams;

use crate::hostfile::Cluster;
use crate::launch::Mpi;
use crate::mpiexec;
use wire::{Finding, Hello, Msg, Probe, Target};

#[derive(Args)]
pub struct DoctorArgs {
    /// Hosts to check together, comma-separated: the MPI's launcher starts an agent on each.
    #[arg(long, value_delimiter = ',', conflicts_with = "hostfile")]
    hosts: Vec<String>,
    /// A file of hosts, as `diwarp run --hostfile` takes it.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// The MPI whose launcher starts the agents.
    #[arg(long, value_enum, env = "MPIRUN_DIWARP_MPI", default_value = "mpich")]
    mpi: Mpi,
    /// An extra launcher argument (repeatable).
    #[arg(long = "mpi-arg", allow_hyphen_values = true)]
    mpi_arg: Vec<String>,
    /// The address agents report to (default: this host's address on the interface diwarp
    /// would bind by default).
    #[arg(long)]
    control: Option<IpAddr>,
    /// Seconds the whole check may take.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..))]
    timeout: u64,
    /// Run as one host's agent, reporting to the coordinator at ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT", hide = true)]
    agent: Option<SocketAddr>,
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("diwarp doctor: {msg}");
    ExitCode::from(2)
}

pub fn main(a: DoctorArgs) -> ExitCode {
    let timeout = Duration::from_secs(a.timeout);
    if let Some(control) = a.agent {
        return agent::main(control, timeout);
    }
    let cluster = match (&a.hostfile, a.hosts.is_empty()) {
        (Some(f), _) => Cluster::from_file(f).map(Some),
        (None, false) => Cluster::from_list(&a.hosts).map(Some),
        (None, true) => Ok(None),
    };
    let cluster = match cluster {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let (mut hosts, mut findings) = match &cluster {
        None => this_host(),
        Some(c) => match several(&a, c, timeout) {
            Ok(r) => r,
            Err(e) => return usage(&e),
        },
    };
    // In the order of their addresses, not of their agents' arrival.
    hosts.sort_by(|a, b| a.0.cmp(&b.0));
    findings.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, h) in &hosts {
        println!("host {name} ({}): {}", h.hostname, describe(h));
    }
    findings.extend(
        hosts
            .iter()
            .flat_map(|(n, h)| h.findings.iter().map(move |f| (n.clone(), f.clone()))),
    );
    findings.extend(
        checks::between(&hosts)
            .into_iter()
            .map(|f| ("hosts".into(), f)),
    );
    for (where_, f) in &findings {
        println!(
            "finding [{}] {where_}: {}. Change: {}",
            f.check, f.what, f.fix
        );
    }
    match findings.len() {
        0 => {
            println!("diwarp doctor: no findings ({} host(s))", hosts.len());
            ExitCode::SUCCESS
        }
        n => {
            println!("diwarp doctor: {n} finding(s)");
            ExitCode::FAILURE
        }
    }
}

fn describe(h: &Hello) -> String {
    let mut parts: Vec<String> = h
        .rails
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let on = r.iface.as_deref().unwrap_or("no interface");
            let mtu = r.mtu.map_or("unknown".into(), |m| m.to_string());
            format!("rail {i} {} on {on}, MTU {mtu}", r.ip)
        })
        .collect();
    if parts.is_empty() {
        parts.push("no rail".into());
    }
    if let (Some(u), Some(t)) = (h.udp_port, h.tcp_port) {
        parts.push(format!("probed on UDP {u}, TCP {t}"));
    }
    parts.join("; ")
}

type Report = (Vec<(String, Hello)>, Vec<(String, Finding)>);

/// This host alone: its checks, and whether the port range has room for a rank.
fn this_host() -> Report {
    let local = checks::local(&EnvParams);
    let mut findings = local.findings;
    if let (Some(rail), Some(range)) = (local.rails.first(), local.range) {
        let ports = diwarp_fi::ports::bind_udp(Some(range), rail.ip)
            .map(drop)
            .and_then(|()| diwarp_fi::ports::listen_tcp(Some(range), rail.ip).map(drop));
        if let Err(e) = ports {
            findings.push(Finding::new(
                "port_range",
                format!("cannot listen on {}: {e}", rail.ip),
                "free ports in the range or widen it",
            ));
        }
    }
    let hello = Hello {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
        rails: local.rails,
        udp_port: None,
        tcp_port: None,
        findings,
    };
    (vec![("this host".into(), hello)], Vec::new())
}

/// The launcher's command that starts one agent on each host of `c`.
fn agent_command(
    mpi: Mpi,
    mpiexec: &Path,
    c: &Cluster,
    extra: &[String],
    agent: &[String],
    caller: &[(String, String)],
) -> Vec<String> {
    let names: Vec<&str> = c.hosts.iter().map(|h| h.name.as_str()).collect();
    let mut v = vec![mpiexec.display().to_string()];
    let n = names.len().to_string();
    match mpi {
        // Hydra passes the whole environment on.
        Mpi::Mpich | Mpi::Impi => {
            v.extend(["-n".into(), n, "-ppn".into(), "1".into()]);
            v.extend(["-hosts".into(), names.join(",")]);
        }
        Mpi::Openmpi | Mpi::Openmpi5 => {
            v.extend(["--allow-run-as-root".into(), "-n".into(), n]);
            v.extend([
                "--host".into(),
                names.join(","),
                "--map-by".into(),
                "node".into(),
            ]);
            for (k, _) in caller.iter().filter(|(k, _)| k.starts_with("FI_DIWARP_")) {
                v.extend(["-x".into(), k.clone()]);
            }
        }
    }
    v.extend(extra.iter().cloned());
    v.extend(agent.iter().cloned());
    v
}

fn several(a: &DoctorArgs, c: &Cluster, timeout: Duration) -> Result<Report, String> {
    let until = Instant::now() + timeout;
    let ip = match a.control {
        Some(ip) => ip,
        None => diwarp_fi::iface::resolve(None)?,
    };
    let listener = TcpListener::bind((ip, 0))
        .map_err(|e| format!("cannot listen for the agents on {ip}: {e} (see --control)"))?;
    let control = listener.local_addr().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| format!("this command's path: {e}"))?;
    let agent = [
        exe.display().to_string(),
        "doctor".into(),
        "--timeout".into(),
        a.timeout.to_string(),
        "--agent".into(),
        control.to_string(),
    ];
    let launcher = mpiexec::find(a.mpi)?;
    let caller: Vec<(String, String)> = std::env::vars().collect();
    let argv = agent_command(a.mpi, &launcher, c, &a.mpi_arg, &agent, &caller);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
    let mut findings = Vec::new();
    let conns = gather(&listener, c.hosts.len(), &mut child, until);
    if conns.len() < c.hosts.len() {
        findings.push((
            "launch".into(),
            Finding::new(
                "launch",
                format!(
                    "{} of {} agents reported: the launcher ({}) could not start diwarp on \
                     every host, or the agents cannot reach {control}",
                    conns.len(),
                    c.hosts.len(),
                    a.mpi.name()
                ),
                "check that this command is at the same path on every host and that the \
                 launcher's ssh works (the launcher's own messages are above)",
            ),
        ));
    }
    let mut hosts = Vec::new();
    let mut links = Vec::new();
    for (peer, stream) in conns {
        let _ = stream.set_read_timeout(Some(until.saturating_duration_since(Instant::now())));
        let Ok(r) = stream.try_clone() else { continue };
        let mut r = BufReader::new(r);
        if let Ok(Msg::Hello(h)) = wire::recv(&mut r) {
            hosts.push((peer.ip().to_string(), h));
            links.push((stream, r));
        }
    }
    let targets: Vec<Target> = hosts
        .iter()
        .filter_map(|(name, h)| {
            Some(Target {
                host: name.clone(),
                ip: h.rails.first()?.ip,
                udp_port: h.udp_port?,
                tcp_port: h.tcp_port?,
            })
        })
        .collect();
    for (s, _) in &mut links {
        let _ = wire::send(s, &Msg::Peers(targets.clone()));
    }
    for (i, (_, r)) in links.iter_mut().enumerate() {
        if let Ok(Msg::Probes(ps)) = wire::recv(r) {
            findings.extend(ps.iter().filter_map(|p| probe_finding(&hosts[i].0, p)));
        } else {
            findings.push((
                hosts[i].0.clone(),
                Finding::new(
                    "launch",
                    "its agent stopped before reporting its probes",
                    "run again",
                ),
            ));
        }
    }
    for (s, _) in &mut links {
        let _ = wire::send(s, &Msg::Done);
    }
    drop(links);
    end(&mut child, Duration::from_secs(5));
    Ok((hosts, findings))
}

/// The agents' control connections, until all `n` came, the launcher gave up, or `until`.
fn gather(
    l: &TcpListener,
    n: usize,
    child: &mut Child,
    until: Instant,
) -> Vec<(SocketAddr, TcpStream)> {
    let _ = l.set_nonblocking(true);
    let mut conns = Vec::new();
    let mut launcher_gone = None;
    while conns.len() < n && Instant::now() < until {
        match l.accept() {
            Ok((s, peer)) => {
                let _ = s.set_nonblocking(false);
                conns.push((peer, s));
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
        // Agents that connect just after their launcher exits still count, for a moment.
        if launcher_gone.is_none() && child.try_wait().ok().flatten().is_some() {
            launcher_gone = Some(Instant::now());
        }
        if launcher_gone.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    conns
}

/// Waits `grace` for the launcher, then kills it.
fn end(child: &mut Child, grace: Duration) {
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn probe_finding(from: &str, p: &Probe) -> Option<(String, Finding)> {
    let why = p.failed.as_ref()?;
    let (check, fix) = if p.proto == "udp" {
        (
            "udp",
            format!(
                "let UDP to port {} (FI_DIWARP_PORT_RANGE, if set) into {} through its \
                 firewall",
                p.port, p.to
            ),
        )
    } else {
        (
            "tcp",
            format!(
                "let TCP to port {} (FI_DIWARP_PORT_RANGE, if set) into {} through its \
                 firewall",
                p.port, p.to
            ),
        )
    };
    Some((
        format!("{from} -> {}", p.to),
        Finding::new(
            check,
            format!("{} to port {}: {why}", p.proto.to_uppercase(), p.port),
            fix,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_started_one_a_host_by_each_launcher() {
        let c = Cluster::from_list(&["a:4".into(), "b".into()]).unwrap();
        let agent = [
            "/bin/diwarp".to_owned(),
            "doctor".into(),
            "--agent".into(),
            "1.2.3.4:5".into(),
        ];
        let env = [
            ("FI_DIWARP_IFACE".to_owned(), "dw0".to_owned()),
            ("HOME".into(), "/".into()),
        ];
        let v = agent_command(Mpi::Mpich, Path::new("/m/mpiexec"), &c, &[], &agent, &env);
        assert_eq!(
            v.join(" "),
            "/m/mpiexec -n 2 -ppn 1 -hosts a,b /bin/diwarp doctor --agent 1.2.3.4:5",
            "slots do not matter: one agent a host"
        );
        let extra = ["-localhost".to_owned(), "a".into()];
        let v = agent_command(
            Mpi::Openmpi,
            Path::new("/o/mpirun"),
            &c,
            &extra,
            &agent,
            &env,
        );
        assert_eq!(
            v.join(" "),
            "/o/mpirun --allow-run-as-root -n 2 --host a,b --map-by node -x FI_DIWARP_IFACE \
             -localhost a /bin/diwarp doctor --agent 1.2.3.4:5"
        );
    }

    #[test]
    fn a_failed_probe_names_both_hosts_and_the_port() {
        let p = Probe {
            to: "10.0.0.2".into(),
            proto: "udp".into(),
            port: 50001,
            failed: Some("no answer within 2 s".into()),
        };
        let (at, f) = probe_finding("10.0.0.1", &p).unwrap();
        assert_eq!(at, "10.0.0.1 -> 10.0.0.2");
        assert_eq!(f.check, "udp");
        assert!(f.what.contains("UDP to port 50001: no answer") && f.fix.contains("into 10.0.0.2"));
        assert!(probe_finding("x", &Probe { failed: None, ..p }).is_none());
    }
}
