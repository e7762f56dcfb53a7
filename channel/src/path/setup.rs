//! RC connections being set up, both ways: ours (we connect to a peer's listener) and the
//! peers' (accepted, then answered once their request says who they are).

use std::net::{SocketAddr, TcpStream};
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use iwarp::verbs::{same_host, QpConfig, RcSetup, VerbsError};

use crate::addr::EpName;
use crate::peer::SlotId;

/// A peer a set-up is with: its slot, and the name it goes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    pub slot: SlotId,
    pub name: EpName,
}

/// How far a set-up has come, and whose it is (as `xnet_state` in libfabric's tcp provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Ours: connecting to the peer.
    Connecting(Known),
    /// Ours, given up for the peer's own connection: its outcome does not matter.
    Abandoned,
    /// Theirs: accepted, its request (which says who it is) not yet answered.
    Asked,
    /// Theirs: answered; the peer if we took its request, `None` if we refused it.
    Answered(Option<Known>),
}

pub struct Pending {
    pub rc: RcSetup,
    pub stage: Stage,
}

impl Pending {
    /// Ours: the peer we connect to. Theirs: the peer, once its request was taken.
    pub fn peer(&self) -> Option<Known> {
        match self.stage {
            Stage::Connecting(n) | Stage::Answered(Some(n)) => Some(n),
            Stage::Abandoned | Stage::Asked | Stage::Answered(None) => None,
        }
    }

    /// Ours (we connect), not a peer's we accepted.
    pub fn initiator(&self) -> bool {
        matches!(self.stage, Stage::Connecting(_) | Stage::Abandoned)
    }
}

pub struct Setups {
    qp: QpConfig,
    local: SocketAddr,
    pub list: Vec<Pending>,
}

impl Setups {
    /// Queue pairs get `qp`, with the CRC asked only of peers on other hosts unless
    /// `qp.crc_same_host`; `local` is our address.
    pub fn new(qp: QpConfig, local: SocketAddr) -> Setups {
        Setups {
            qp,
            local,
            list: Vec::new(),
        }
    }

    /// The queue-pair settings for a connection with `peer`.
    pub fn config_for(&self, peer: SocketAddr) -> QpConfig {
        QpConfig {
            crc: self.qp.crc && (self.qp.crc_same_host || !same_host(self.local, peer)),
            ..self.qp.clone()
        }
    }

    pub fn timeout(&self) -> Duration {
        self.qp.connect_timeout
    }

    /// Starts connecting to `peer`, introducing ourselves as `me`.
    pub fn initiator(&mut self, me: &EpName, peer: Known, now: Instant) -> Result<(), VerbsError> {
        let to = SocketAddr::new(peer.name.ip, peer.name.tcp_port);
        let rc = RcSetup::connect(to, &self.config_for(to), &me.encode(), now)?;
        self.list.push(Pending {
            rc,
            stage: Stage::Connecting(peer),
        });
        Ok(())
    }

    /// A peer connected to our listener.
    pub fn responder(&mut self, stream: TcpStream, now: Instant) {
        let Ok(from) = stream.peer_addr() else {
            return;
        };
        match RcSetup::accept_deciding(stream, &self.config_for(from), now) {
            Ok(rc) => self.list.push(Pending {
                rc,
                stage: Stage::Asked,
            }),
            Err(e) => crate::diag!(Info, EpCtrl, "RC connection from {from} dropped: {e}"),
        }
    }

    /// Whether a connection of ours to slot `slot`'s peer is being set up.
    pub fn connecting_to(&self, slot: SlotId) -> bool {
        self.list
            .iter()
            .any(|p| matches!(p.stage, Stage::Connecting(k) if k.slot == slot))
    }

    /// Whether a connection with slot `slot`'s peer is being set up, ours or one of its we
    /// accepted.
    pub fn involves(&self, slot: SlotId) -> bool {
        self.list
            .iter()
            .any(|p| p.peer().is_some_and(|k| k.slot == slot))
    }

    /// Gives up our connection to slot `slot`'s peer: the peer's wins.
    pub fn abandon(&mut self, slot: SlotId) {
        for p in &mut self.list {
            if matches!(p.stage, Stage::Connecting(k) if k.slot == slot) {
                p.stage = Stage::Abandoned;
            }
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.list.iter().filter_map(|p| p.rc.deadline()).min()
    }

    pub fn memory(&self) -> usize {
        self.list.capacity() * std::mem::size_of::<Pending>()
    }

    pub fn sockets(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.list.iter().map(|p| p.rc.socket())
    }
}
