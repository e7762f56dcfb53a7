//! `diwarp doctor --agent ADDR`: one host's side. It makes the host's checks, listens for
//! probes on one UDP and one TCP port (in `FI_DIWARP_PORT_RANGE` if set, on the first rail's
//! address, where a rank would), reports to the coordinator at ADDR, probes every other
//! agent it is told of, reports what went through, and ends when told to (or when the
//! coordinator goes away).

use std::io::{BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use diwarp_fi::params::EnvParams;
use diwarp_fi::ports;

use super::checks;
use super::wire::{self, Finding, Hello, Msg, Probe, Target, HELLO};

/// How long one probe waits for its echo: a LAN answers in well under a millisecond, so
/// silence this long is a drop, not a delay.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

/// A probe's bytes: [`HELLO`] and a number of this process's, so an echo matches its probe.
fn hello_bytes(n: u32) -> Vec<u8> {
    let mut v = HELLO.to_vec();
    v.extend(format!("{}.{n}", std::process::id()).as_bytes());
    v
}

/// Echoes every datagram that starts with [`HELLO`] to its sender.
fn serve_udp(sock: UdpSocket) {
    let mut buf = [0u8; 256];
    while let Ok((n, from)) = sock.recv_from(&mut buf) {
        if buf[..n].starts_with(HELLO) {
            let _ = sock.send_to(&buf[..n], from);
        }
    }
}

/// Echoes the first bytes of every connection when they start with [`HELLO`].
fn serve_tcp(l: TcpListener) {
    for mut s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = s.set_read_timeout(Some(PROBE_WAIT));
            let mut buf = [0u8; 256];
            if let Ok(n) = s.read(&mut buf) {
                if buf[..n].starts_with(HELLO) {
                    let _ = s.write_all(&buf[..n]);
                }
            }
        });
    }
}

/// A datagram from `from` to `to` and its echo; `None`: it came back.
pub fn probe_udp(from: IpAddr, to: SocketAddr, n: u32) -> Option<String> {
    let sock = match UdpSocket::bind(SocketAddr::new(from, 0)) {
        Ok(s) => s,
        Err(e) => return Some(format!("cannot open a UDP socket on {from}: {e}")),
    };
    let msg = hello_bytes(n);
    let until = Instant::now() + PROBE_WAIT;
    let mut buf = [0u8; 256];
    // Several tries inside the wait: one lost datagram is no blocked port.
    while Instant::now() < until {
        if let Err(e) = sock.send_to(&msg, to) {
            return Some(format!("sending: {e}"));
        }
        let _ = sock.set_read_timeout(Some(Duration::from_millis(250)));
        let deadline = Instant::now() + Duration::from_millis(250);
        while Instant::now() < deadline {
            match sock.recv_from(&mut buf) {
                Ok((len, src)) if src == to && buf[..len] == msg[..] => return None,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Some("refused (ICMP port unreachable): nothing listens there".into())
                }
                Err(_) => break,
            }
        }
    }
    Some(format!(
        "no answer within {} s: dropped on the way",
        PROBE_WAIT.as_secs()
    ))
}

/// A TCP connection to `to`, a hello and its echo; `None`: it came back.
pub fn probe_tcp(to: SocketAddr, n: u32) -> Option<String> {
    let mut s = match TcpStream::connect_timeout(&to, PROBE_WAIT) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            return Some(format!(
                "connecting: no answer within {} s: dropped on the way",
                PROBE_WAIT.as_secs()
            ))
        }
        Err(e) => return Some(format!("connecting: {e}")),
    };
    let msg = hello_bytes(n);
    let _ = s.set_read_timeout(Some(PROBE_WAIT));
    let mut back = vec![0u8; msg.len()];
    match s.write_all(&msg).and_then(|()| s.read_exact(&mut back)) {
        Ok(()) if back == msg => None,
        Ok(()) => Some("the echo differs from the hello".into()),
        Err(e) => Some(format!("no echo: {e}")),
    }
}

/// The probe ports, or the finding that says why there are none.
fn listen(
    ip: IpAddr,
    range: Option<ports::PortRange>,
) -> Result<(UdpSocket, TcpListener), Finding> {
    let why = |e: ports::BindError| {
        Finding::new(
            "port_range",
            format!("cannot listen on {ip}: {e}"),
            "free ports in the range or widen it; a rank needs one UDP port per rail and one TCP port",
        )
    };
    let udp = ports::bind_udp(range, ip).map_err(why)?;
    let tcp = ports::listen_tcp(range, ip).map_err(why)?;
    Ok((udp, tcp))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

pub fn main(control: SocketAddr, timeout: Duration) -> ExitCode {
    // The coordinator ends us; if it never does (a launcher that lost it), so does this.
    std::thread::spawn(move || {
        std::thread::sleep(timeout);
        std::process::exit(3);
    });
    let local = checks::local(&EnvParams);
    let mut findings = local.findings;
    let mut ports = (None, None);
    let mut from = None;
    if let Some(rail) = local.rails.first() {
        match listen(rail.ip, local.range) {
            Ok((udp, tcp)) => {
                ports = (
                    udp.local_addr().ok().map(|a| a.port()),
                    tcp.local_addr().ok().map(|a| a.port()),
                );
                from = Some(rail.ip);
                std::thread::spawn(move || serve_udp(udp));
                std::thread::spawn(move || serve_tcp(tcp));
            }
            Err(f) => findings.push(f),
        }
    }
    let hello = Hello {
        hostname: hostname(),
        rails: local.rails,
        udp_port: ports.0,
        tcp_port: ports.1,
        findings,
    };
    match talk(control, hello, from) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("diwarp doctor --agent: the coordinator at {control}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn talk(control: SocketAddr, hello: Hello, from: Option<IpAddr>) -> std::io::Result<()> {
    let own = (hello.udp_port, hello.tcp_port);
    let mut out = TcpStream::connect_timeout(&control, Duration::from_secs(10))?;
    let mut inp = BufReader::new(out.try_clone()?);
    wire::send(&mut out, &Msg::Hello(hello))?;
    let Msg::Peers(peers) = wire::recv(&mut inp)? else {
        return Err(std::io::Error::other("expected the list of peers"));
    };
    let mut probes = Vec::new();
    if let Some(from) = from {
        let others = peers
            .iter()
            .filter(|t| !(t.ip == from && (Some(t.udp_port), Some(t.tcp_port)) == own));
        for (i, t) in others.enumerate() {
            probes.extend(probe_both(from, t, i as u32));
        }
    }
    wire::send(&mut out, &Msg::Probes(probes))?;
    // Done, or the coordinator gone: either way this host's part is over.
    let _ = wire::recv(&mut inp);
    Ok(())
}

fn probe_both(from: IpAddr, t: &Target, n: u32) -> [Probe; 2] {
    let udp = probe_udp(from, SocketAddr::new(t.ip, t.udp_port), 2 * n);
    let tcp = probe_tcp(SocketAddr::new(t.ip, t.tcp_port), 2 * n + 1);
    [
        Probe {
            to: t.host.clone(),
            proto: "udp".into(),
            port: t.udp_port,
            failed: udp,
        },
        Probe {
            to: t.host.clone(),
            proto: "tcp".into(),
            port: t.tcp_port,
            failed: tcp,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[test]
    fn probes_come_back_from_a_listening_agent_and_not_from_a_silent_port() {
        let (udp, tcp) = listen(LO, None).unwrap();
        let (u, t) = (udp.local_addr().unwrap(), tcp.local_addr().unwrap());
        std::thread::spawn(move || serve_udp(udp));
        std::thread::spawn(move || serve_tcp(tcp));
        assert_eq!(probe_udp(LO, u, 1), None);
        assert_eq!(probe_tcp(t, 2), None);
        // A socket that takes datagrams and answers none: the probe waits, then says so.
        let mute = UdpSocket::bind((LO, 0)).unwrap();
        let started = Instant::now();
        let e = probe_udp(LO, mute.local_addr().unwrap(), 3).unwrap();
        assert!(
            e.contains("no answer") && started.elapsed() >= PROBE_WAIT,
            "{e}"
        );
        let closed = TcpListener::bind((LO, 0)).unwrap().local_addr().unwrap();
        let e = probe_tcp(closed, 4).unwrap();
        assert!(e.contains("refused"), "{e}");
    }
}
