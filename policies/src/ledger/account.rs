//! The ledger's named accounts: what each holds and what it grows with.

use serde::Serialize;

/// What an account's bytes grow with, for the projection to many ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// One share per peer met: projected as per-peer cost × peers.
    Peers,
    /// With the traffic in flight, bounded by a budget, not by the number of peers.
    Traffic,
    /// Once per endpoint.
    Fixed,
    /// One share per RC connection open: projected as per-connection cost × connections
    /// (every peer in `rc` mode, at most the cap in `hybrid`).
    Connections,
}

macro_rules! accounts {
    ($($(#[doc = $doc:literal])* $v:ident = $name:literal, $scale:ident;)*) => {
        /// A named account. Each layer reports its bytes in a typed structure of its own; the
        /// channel charges them here, one account per concern.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Account { $($(#[doc = $doc])* $v,)* }

        impl Account {
            /// Every account, in report order.
            pub const ALL: &'static [Account] = &[$(Account::$v,)*];

            /// The account's name in reports.
            pub fn name(self) -> &'static str {
                match self { $(Account::$v => $name,)* }
            }

            /// What the account grows with.
            pub fn scale(self) -> Scale {
                match self { $(Account::$v => Scale::$scale,)* }
            }

            /// One line on what the account holds (the report's documentation).
            pub fn doc(self) -> &'static str {
                match self { $(Account::$v => concat!($($doc),*).trim_ascii(),)* }
            }

            /// The account named `name` in reports.
            pub fn from_name(name: &str) -> Option<Account> {
                Account::ALL.iter().copied().find(|a| a.name() == name)
            }
        }
    };
}

accounts! {
    /// Per-peer state of the datagram path: the queue pair's peer entry and address maps, the
    /// reliability session (sequence state, RTT, timers) and its bookkeeping queues.
    PeerState = "peer_state", Peers;
    /// Sends waiting for the reliability engine (handshake under way, window or credit full)
    /// or queued in the engine and not yet sent, and the socket's batch of outgoing datagrams.
    SendQueue = "send_queue", Traffic;
    /// Sent datagrams not yet acknowledged, kept for retransmission.
    Retransmit = "retransmit", Traffic;
    /// The receive ring the socket is read into (slots and spares) and datagrams set aside
    /// until receives are posted.
    ReceiveRing = "receive_ring", Fixed;
    /// Messages held for their turn: segmented messages staged in receiver mode, whole
    /// messages the engine holds out of order, small messages stashed for lack of a receive.
    Staged = "staged", Traffic;
    /// Unexpected messages: eager copies and rendezvous requests no receive has matched yet.
    Unexpected = "unexpected", Traffic;
    /// Pushed rendezvous chunks held for unexpected messages.
    HeldPushes = "held_pushes", Traffic;
    /// Buffers for copied sends kept for reuse: the endpoint's spares and the unused room of
    /// those in flight, and the queue pair's pool of large message buffers.
    SendPool = "send_pool", Traffic;
    /// Operations in progress: pending sends, rendezvous receives, multi-receive buffers being
    /// filled, the push routes, copies queued for the queue pair, stand-ins for unknown senders.
    Rendezvous = "rendezvous", Traffic;
    /// The memory-region table (registered regions are the application's, not counted).
    Rma = "rma", Fixed;
    /// The address vector: a slot per inserted name and the reverse map from addresses.
    AddressVector = "address_vector", Peers;
    /// Completion queues: entries waiting to be read.
    CompletionQueues = "completion_queues", Traffic;
    /// Matching structures: posted receives, exact buckets, wildcard lists.
    Matching = "matching", Traffic;
    /// The reliability engine's own tables: the session map, ready lists, timer heap.
    Engine = "engine", Peers;
    /// Datagrams held back by diwarp's fault layer (DIWARP_FAULTS), when on.
    FaultLayer = "fault_layer", Traffic;
    /// RC connections: each one's buffers (the FPDU decoder's, the send backlog the kernel did
    /// not take, a message being joined) and its list of messages not yet acknowledged, and
    /// the connections being set up.
    Connections = "connections", Connections;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<_> = Account::ALL.iter().map(|a| a.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Account::ALL.len());
        for &a in Account::ALL {
            assert_eq!(Account::from_name(a.name()), Some(a));
            assert!(!a.doc().is_empty() && !a.doc().starts_with(' '), "{a:?}");
        }
        assert_eq!(Account::from_name("nothing"), None);
    }
}
