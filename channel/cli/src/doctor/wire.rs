//! What the coordinator and its agents say to each other over the control connection: one
//! JSON object a line. The probes between agents carry no JSON, only [`HELLO`] and its echo.

use std::io::{BufRead, Write};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The start of every probe, datagram or stream, and of its echo: a stranger's traffic on a
/// probe port is not taken for an answer.
pub const HELLO: &[u8] = b"diwarp-doctor hello ";

/// One problem, and what to change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// A short name of the check (`iface`, `mtu`, `udp`, ...), for scripts to match.
    pub check: String,
    pub what: String,
    pub fix: String,
}

impl Finding {
    pub fn new(check: &str, what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            check: check.into(),
            what: what.into(),
            fix: fix.into(),
        }
    }
}

/// A rail as its host sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rail {
    pub ip: IpAddr,
    pub iface: Option<String>,
    pub mtu: Option<u32>,
}

/// What an agent found on its host, and where its probe sockets listen (none when it has
/// no rail to listen on).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    pub hostname: String,
    pub rails: Vec<Rail>,
    pub udp_port: Option<u16>,
    pub tcp_port: Option<u16>,
    pub findings: Vec<Finding>,
}

/// Where another agent listens.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub host: String,
    pub ip: IpAddr,
    pub udp_port: u16,
    pub tcp_port: u16,
}

/// One probe's outcome: `None` went through, else why not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Probe {
    pub to: String,
    pub proto: String,
    pub port: u16,
    pub failed: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Msg {
    Hello(Hello),
    Peers(Vec<Target>),
    Probes(Vec<Probe>),
    Done,
}

pub fn send(w: &mut impl Write, m: &Msg) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// The next message; an end of stream or a line that is no message is an error.
pub fn recv(r: &mut impl BufRead) -> std::io::Result<Msg> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    serde_json::from_str(&line).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_survive_the_line() {
        let mut buf = Vec::new();
        let f = Finding::new("mtu", "a", "b");
        send(
            &mut buf,
            &Msg::Probes(vec![Probe {
                to: "h".into(),
                proto: "udp".into(),
                port: 7,
                failed: Some("x".into()),
            }]),
        )
        .unwrap();
        send(&mut buf, &Msg::Done).unwrap();
        let mut r = std::io::BufReader::new(&buf[..]);
        assert!(matches!(recv(&mut r).unwrap(), Msg::Probes(p) if p[0].port == 7));
        assert!(matches!(recv(&mut r).unwrap(), Msg::Done));
        assert!(recv(&mut r).is_err(), "the end is an error");
        assert!(recv(&mut std::io::BufReader::new(&b"{\"Nope\":1}\n"[..])).is_err());
        assert_eq!(f.check, "mtu");
    }
}
