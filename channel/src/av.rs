//! Address vectors: peers' names in, compact `fi_addr_t` handles out.
//!
//! TABLE and MAP behave alike here: a handle is the insertion index, which is what TABLE
//! promises (MPICH relies on 0, 1, 2, ... in insertion order) and is as good as any for MAP.
//! A name inserted again keeps its first handle and takes no index.
//! Removed slots are never reused, so a stale handle can never reach a different peer
//! (Open MPI removes every peer just before closing the endpoint, with data still in flight).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::addr::{EpName, MoreRails, NameError};
use crate::diag;
use crate::domain::Domain;
use crate::error::{Errno, Result};
use crate::hash::{map_bytes, Index, Map};
use crate::log::{misconfigured, Subsys};
use crate::sys::{FI_AV_MAP, FI_AV_TABLE, FI_AV_UNSPEC, FI_MORE, FI_SYNC_ERR};

/// `FI_ADDR_NOTAVAIL`: the handle of an address that could not be inserted.
pub const ADDR_NOTAVAIL: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvType {
    Table,
    Map,
}

#[derive(Debug)]
pub struct AddressVector {
    pub domain: Arc<Domain>,
    pub av_type: AvType,
    table: RwLock<Table>,
    /// `table.slots.len()`, stored after each insert's names are in `by_addr`.
    insertions: AtomicUsize,
    /// Bumped whenever a handle dies or an address comes to stand for another handle: what
    /// an endpoint remembered of handles before is to be looked up again.
    remaps: AtomicUsize,
}

/// Handles to names, and back from a datagram's source address (the newest live handle for
/// an address, which is what a reinserted peer should be known by).
#[derive(Debug, Default)]
struct Table {
    slots: Vec<Option<Slot>>,
    /// Handles by their name's datagram address, found through `slots`: a handle's position
    /// and nothing else, so an entry never contacted costs its slot and a few bytes here.
    by_addr: Index,
    /// The rails after the first of the names that have several, by handle: a one-rail job
    /// keeps it empty and its slots at 40 bytes.
    more: Map<u32, MoreRails>,
}

/// A live handle's name but its rails after the first (`Table::more`), laid out flat (an
/// `EpName` beside a count would pad past 100 bytes), and how many of its inserts are not yet
/// removed.
#[derive(Debug, Clone, Copy)]
struct Slot {
    nonce: u64,
    qpn: u32,
    inserts: u32,
    udp_port: u16,
    tcp_port: u16,
    ip: std::net::IpAddr,
}

impl Slot {
    fn new(n: EpName) -> Slot {
        Slot {
            nonce: n.nonce,
            qpn: n.qpn,
            inserts: 1,
            udp_port: n.udp_port,
            tcp_port: n.tcp_port,
            ip: n.ip,
        }
    }

    fn name(&self, more: Option<&MoreRails>) -> EpName {
        EpName {
            ip: self.ip,
            udp_port: self.udp_port,
            qpn: self.qpn,
            tcp_port: self.tcp_port,
            nonce: self.nonce,
            more: more.copied().unwrap_or(MoreRails::NONE),
        }
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.udp_port)
    }
}

impl Table {
    /// The datagram address of handle `h`'s name (the unspecified address for a dead one,
    /// which no name has: decoding refuses port 0).
    fn addr_of(slots: &[Option<Slot>], h: u32) -> SocketAddr {
        slots[h as usize].map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |s| s.addr())
    }

    /// Handle `h`'s whole name, if it is live.
    fn name_of(&self, h: u32) -> Option<EpName> {
        let s = self.slots.get(h as usize).copied().flatten()?;
        Some(s.name(self.more.get(&h)))
    }

    fn handle_of(&self, addr: &SocketAddr) -> Option<u64> {
        let slots = &self.slots;
        self.by_addr
            .find(addr, |h| Self::addr_of(slots, h))
            .map(u64::from)
    }
}

/// The outcome of one batch insert: a handle (or [`ADDR_NOTAVAIL`]) per address, how many
/// succeeded, and per address 0 or the error that refused it (for FI_SYNC_ERR).
#[derive(Debug, PartialEq, Eq)]
pub struct Inserted {
    pub handles: Vec<u64>,
    pub errors: Vec<Errno>,
    pub count: usize,
}

impl AddressVector {
    /// Bytes of the table (a slot per insert, the reverse map), and the names it holds.
    pub fn memory(&self) -> (usize, usize) {
        let t = self.table.read();
        let bytes = t.slots.capacity() * std::mem::size_of::<Option<Slot>>()
            + t.by_addr.bytes()
            + map_bytes(&t.more);
        (bytes, t.by_addr.len())
    }

    /// `count` is a sizing hint. Named (shared) AVs, event-queue AVs and receive-context
    /// bits belong to features diwarp does not offer.
    pub fn open(
        domain: &Arc<Domain>,
        av_type: u32,
        count: usize,
        rx_ctx_bits: i32,
        named: bool,
        flags: u64,
    ) -> Result<Arc<AddressVector>> {
        let av_type = match av_type {
            FI_AV_TABLE => AvType::Table,
            FI_AV_MAP => AvType::Map,
            FI_AV_UNSPEC if domain.info.domain.av_type == FI_AV_MAP => AvType::Map,
            FI_AV_UNSPEC => AvType::Table,
            _ => return Err(Errno::INVAL),
        };
        if rx_ctx_bits != 0 || named {
            return Err(Errno::NOSYS);
        }
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        Ok(Arc::new(AddressVector {
            domain: Arc::clone(domain),
            av_type,
            table: RwLock::new(Table {
                slots: Vec::with_capacity(count.min(1 << 16)),
                by_addr: Index::default(),
                more: Map::default(),
            }),
            insertions: AtomicUsize::new(0),
            remaps: AtomicUsize::new(0),
        }))
    }

    /// The fixed length of every address this AV takes.
    pub fn addrlen(&self) -> usize {
        EpName::LEN
    }

    /// Inserts `names.len() / addrlen` packed names. Unparseable names get
    /// [`ADDR_NOTAVAIL`] and are not counted, so a caller comparing the count sees them.
    pub fn insert(&self, names: &[u8], flags: u64) -> Result<Inserted> {
        if flags & !(FI_MORE | FI_SYNC_ERR) != 0 {
            return Err(Errno::BADFLAGS);
        }
        let mut t = self.table.write();
        let mut remapped = false;
        let mut out = Inserted {
            handles: Vec::with_capacity(names.len() / EpName::LEN),
            errors: Vec::with_capacity(names.len() / EpName::LEN),
            count: 0,
        };
        for chunk in names.chunks_exact(EpName::LEN) {
            match EpName::decode(chunk) {
                Ok(name) => {
                    let addr = name.udp_addr();
                    // The same name again (Open MPI's threads can each insert a peer they
                    // meet at once) gets the same handle, as libfabric's own AVs give it:
                    // with two, a receive directed at the older one would never again match
                    // what the peer sends, which arrives under the newer.
                    let same = t
                        .handle_of(&addr)
                        .filter(|&h| t.name_of(h as u32) == Some(name));
                    let handle = match same {
                        Some(h) => {
                            let slot = t.slots[h as usize].as_mut().expect("live");
                            slot.inserts = slot.inserts.saturating_add(1);
                            h
                        }
                        None => {
                            // Handles are positions in the index: fewer than 2^32 of them.
                            let Ok(h) = u32::try_from(t.slots.len()) else {
                                return Err(Errno::NOMEM);
                            };
                            t.slots.push(Some(Slot::new(name)));
                            if !name.more.is_empty() {
                                t.more.insert(h, name.more);
                            }
                            let Table { slots, by_addr, .. } = &mut *t;
                            remapped |= by_addr
                                .insert(&addr, h, |p| Table::addr_of(slots, p))
                                .is_some();
                            u64::from(h)
                        }
                    };
                    out.handles.push(handle);
                    out.errors.push(Errno(0));
                    out.count += 1;
                }
                Err(why) => {
                    let what = format_args!("address {} refused: {why}", straddr(chunk));
                    match why {
                        NameError::Version(_) => {
                            misconfigured(Subsys::Av, module_path!(), line!(), what)
                        }
                        _ => diag!(Warn, Av, "{what}"),
                    }
                    out.handles.push(ADDR_NOTAVAIL);
                    out.errors.push(Errno::INVAL);
                }
            }
        }
        if remapped {
            self.remaps.fetch_add(1, Ordering::Release);
        }
        self.insertions.store(t.slots.len(), Ordering::Release);
        Ok(out)
    }

    /// Removes the given handles; all must be live, else nothing is removed.
    pub fn remove(&self, handles: &[u64], flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        let mut t = self.table.write();
        let live = |h: u64| {
            usize::try_from(h)
                .ok()
                .and_then(|i| t.slots.get(i))
                .is_some_and(Option::is_some)
        };
        if !handles.iter().all(|&h| live(h)) {
            return Err(Errno::INVAL);
        }
        for &h in handles {
            // A handle listed twice may be gone by its second turn.
            let Some(slot) = t.slots[h as usize].as_mut() else {
                continue;
            };
            slot.inserts -= 1;
            if slot.inserts > 0 {
                continue;
            }
            let addr = slot.addr();
            t.more.remove(&(h as u32));
            let Table { slots, by_addr, .. } = &mut *t;
            // Before the slot dies: the index finds its entries through the slots.
            by_addr.remove(&addr, h as u32, |p| Table::addr_of(slots, p));
            slots[h as usize] = None;
            self.remaps.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    pub fn lookup(&self, handle: u64) -> Result<EpName> {
        usize::try_from(handle)
            .ok()
            .and_then(|i| self.table.read().name_of(u32::try_from(i).ok()?))
            .ok_or(Errno::INVAL)
    }

    /// Handles given out so far (removed ones included): changes whenever an insert may have
    /// named a sender. Read without the lock: every receive post looks at it.
    pub fn insertions(&self) -> usize {
        self.insertions.load(Ordering::Acquire)
    }

    /// Changes whenever a handle died or an address came to stand for a newer handle (see
    /// `remaps`); read without the lock, by every message.
    pub fn remaps(&self) -> usize {
        self.remaps.load(Ordering::Acquire)
    }

    /// The handles of several addresses, under one lock.
    pub fn handles_of(&self, addrs: impl Iterator<Item = SocketAddr>) -> Vec<Option<u64>> {
        let t = self.table.read();
        addrs.map(|a| t.handle_of(&a)).collect()
    }

    /// The handle a datagram from `addr` is reported with, if the peer is in the vector.
    pub fn handle_of(&self, addr: SocketAddr) -> Option<u64> {
        self.table.read().handle_of(&addr)
    }
}

/// `fi_av_straddr`: a printable form of any address bytes, ours or not.
pub fn straddr(bytes: &[u8]) -> String {
    match EpName::decode(bytes) {
        Ok(n) => n.to_string(),
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("diwarp://?{hex}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::domain;

    fn name(port: u16) -> EpName {
        EpName {
            ip: "127.0.0.1".parse().unwrap(),
            udp_port: port,
            qpn: 1,
            tcp_port: 0,
            nonce: port as u64,
            more: MoreRails::NONE,
        }
    }

    /// A name's further rails come back whole from `lookup`, count in the table's bytes, and
    /// go with the handle.
    #[test]
    fn names_keep_every_rail() {
        let a = av(FI_AV_TABLE);
        let two = EpName {
            more: MoreRails::from_slice(&[crate::addr::RailAddr {
                ip: "127.0.0.2".parse().unwrap(),
                udp_port: 9,
                tcp_port: 0,
            }]),
            ..name(8)
        };
        let one_rail = a.memory().0;
        let h = a.insert(&packed(&[name(7), two]), 0).unwrap().handles;
        assert_eq!(a.lookup(h[0]), Ok(name(7)));
        assert_eq!(a.lookup(h[1]), Ok(two));
        assert!(a.memory().0 > one_rail);
        // The same name again is the same handle.
        assert_eq!(a.insert(&packed(&[two]), 0).unwrap().handles, vec![h[1]]);
        a.remove(&[h[1], h[1]], 0).unwrap();
        assert_eq!(a.lookup(h[1]), Err(Errno::INVAL));
        assert!(a.table.read().more.is_empty());
    }

    fn packed(names: &[EpName]) -> Vec<u8> {
        names.iter().flat_map(|n| n.encode()).collect()
    }

    fn av(t: u32) -> Arc<AddressVector> {
        AddressVector::open(&domain(), t, 4, 0, false, 0).unwrap()
    }

    #[test]
    fn batch_insert_returns_count_and_sequential_handles() {
        for t in [FI_AV_TABLE, FI_AV_MAP] {
            let av = av(t);
            let r = av.insert(&packed(&[name(1), name(2), name(3)]), 0).unwrap();
            assert_eq!(r.count, 3);
            assert_eq!(r.handles, [0, 1, 2]);
            assert_eq!(av.lookup(1), Ok(name(2)));
            let r = av.insert(&packed(&[name(4)]), FI_MORE).unwrap();
            assert_eq!((r.count, r.handles[0]), (1, 3));
        }
    }

    #[test]
    fn bad_names_are_not_counted() {
        let av = av(FI_AV_TABLE);
        let mut bytes = packed(&[name(1), name(2), name(3)]);
        bytes[EpName::LEN] ^= 0xff;
        // The name of a rank running another build (an older name format).
        bytes[2 * EpName::LEN + 2] -= 1;
        let r = av.insert(&bytes, FI_SYNC_ERR).unwrap();
        assert_eq!(r.count, 1);
        assert_eq!(r.handles, [0, ADDR_NOTAVAIL, ADDR_NOTAVAIL]);
        assert_eq!(r.errors, [Errno(0), Errno::INVAL, Errno::INVAL]);
    }

    #[test]
    fn removed_handles_stay_dead() {
        let av = av(FI_AV_MAP);
        av.insert(&packed(&[name(1), name(2)]), 0).unwrap();
        assert_eq!(av.remove(&[0, 7], 0), Err(Errno::INVAL));
        assert_eq!(av.lookup(0), Ok(name(1)), "a failed remove removes nothing");
        assert_eq!(av.handle_of(name(1).udp_addr()), Some(0));
        av.remove(&[0], 0).unwrap();
        assert_eq!(av.lookup(0), Err(Errno::INVAL));
        assert_eq!(av.handle_of(name(1).udp_addr()), None);
        assert_eq!(av.handle_of(name(2).udp_addr()), Some(1));
        assert_eq!(av.remove(&[0], 0), Err(Errno::INVAL));
        let r = av.insert(&packed(&[name(3)]), 0).unwrap();
        assert_eq!(r.handles, [2]);
    }

    #[test]
    fn a_name_inserted_twice_keeps_its_handle_until_removed_twice() {
        let av = av(FI_AV_MAP);
        av.insert(&packed(&[name(1), name(2)]), 0).unwrap();
        let r = av.insert(&packed(&[name(1)]), 0).unwrap();
        assert_eq!(
            (r.count, r.handles[0]),
            (1, 0),
            "the same name, the same handle"
        );
        assert_eq!(av.handle_of(name(1).udp_addr()), Some(0));
        av.remove(&[0], 0).unwrap();
        assert_eq!(av.lookup(0), Ok(name(1)), "one insert is left");
        assert_eq!(av.handle_of(name(1).udp_addr()), Some(0));
        av.remove(&[0], 0).unwrap();
        assert_eq!(av.lookup(0), Err(Errno::INVAL));
        assert_eq!(av.handle_of(name(1).udp_addr()), None);
        // A restarted peer on the same address has another name: a handle of its own, which
        // its datagrams are reported with.
        let mut reborn = name(2);
        reborn.nonce ^= 1;
        let r = av.insert(&packed(&[reborn]), 0).unwrap();
        assert_eq!(r.handles, [2]);
        assert_eq!(av.handle_of(reborn.udp_addr()), Some(2));
        assert_eq!(av.lookup(1), Ok(name(2)));
    }

    #[test]
    fn open_checks() {
        let d = domain();
        assert_eq!(
            AddressVector::open(&d, FI_AV_UNSPEC, 0, 0, false, 0)
                .unwrap()
                .av_type,
            AvType::Table
        );
        assert_eq!(
            AddressVector::open(&d, 9, 0, 0, false, 0).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            AddressVector::open(&d, FI_AV_MAP, 0, 2, false, 0).err(),
            Some(Errno::NOSYS)
        );
        assert_eq!(
            AddressVector::open(&d, FI_AV_MAP, 0, 0, true, 0).err(),
            Some(Errno::NOSYS)
        );
    }

    #[test]
    fn straddr_forms() {
        assert_eq!(
            straddr(&name(9).encode()),
            "diwarp://127.0.0.1:9/1/0#0000000000000009"
        );
        assert_eq!(straddr(&[1, 2]), "diwarp://?0102");
    }
}
