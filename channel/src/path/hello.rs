//! What two endpoints say while an RC connection is set up, as MPA private data: the initiator
//! sends its endpoint name, the responder answers with its own, or refuses with a reason.

use policies::promote::Refusal;

use crate::addr::EpName;

/// Why a responder refused a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// It has its cap of connections.
    Cap,
    /// It runs in `ud` mode.
    Mode,
    /// Both sides connected at once and the responder's own connection wins.
    Lost,
    /// The request did not carry a diwarp endpoint name.
    Foreign,
}

const CAP: &[u8] = b"diwarp:cap";
const MODE: &[u8] = b"diwarp:mode";
const LOST: &[u8] = b"diwarp:lost";
const FOREIGN: &[u8] = b"diwarp:foreign";

impl Reason {
    pub fn encode(self) -> &'static [u8] {
        match self {
            Reason::Cap => CAP,
            Reason::Mode => MODE,
            Reason::Lost => LOST,
            Reason::Foreign => FOREIGN,
        }
    }

    /// The reason a rejecting Reply gave; `None` for anything else (a foreign responder).
    pub fn decode(b: &[u8]) -> Option<Reason> {
        [Reason::Cap, Reason::Mode, Reason::Lost, Reason::Foreign]
            .into_iter()
            .find(|r| r.encode() == b)
    }

    /// What the promotion policy makes of it.
    pub fn refusal(self) -> Refusal {
        match self {
            Reason::Cap => Refusal::Cap,
            Reason::Mode => Refusal::Mode,
            Reason::Lost | Reason::Foreign => Refusal::Failed,
        }
    }
}

/// Which of two simultaneous connections between `a` and `b` stays: the one the lower name
/// started. Both ends compute the same answer from the same two names.
pub fn initiator_wins(initiator: &EpName, responder: &EpName) -> bool {
    key(initiator) < key(responder)
}

fn key(n: &EpName) -> ([u8; 16], u16, u32, u64) {
    let ip = match n.ip {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(a) => a.octets(),
    };
    (ip, n.udp_port, n.qpn, n.nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_and_one_side_wins() {
        for r in [Reason::Cap, Reason::Mode, Reason::Lost, Reason::Foreign] {
            assert_eq!(Reason::decode(r.encode()), Some(r));
        }
        assert_eq!(Reason::decode(b"full"), None);
        let name = |port| EpName {
            ip: "10.0.0.1".parse().unwrap(),
            udp_port: port,
            qpn: 1,
            tcp_port: 9,
            nonce: 5,
            more: crate::addr::MoreRails::NONE,
        };
        let (a, b) = (name(1), name(2));
        assert!(initiator_wins(&a, &b) != initiator_wins(&b, &a));
    }
}
