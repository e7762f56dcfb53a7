//! The queue pair's view of the data path ([`RdReceiver`]): arrivals lent where they lie, held
//! for their turn in the peer's sequence, and chunks placed at once, even in place.

use super::*;

/// Arrivals, lent by the queue pair, behind their per-peer header (`peer`). They are handed
/// over in the peer's sequence; a rendezvous chunk is placed at once, whatever its turn.
impl RdReceiver for State {
    fn early(&mut self, src: SocketAddr, payload: &[u8], in_order: bool) -> bool {
        let from = self.peers.slot(src);
        let (verdict, seq, body) = self.peers.arrive(from, payload);
        // Counted once: an early offer it does not take comes again in its turn.
        let comes_again = verdict == Verdict::Ahead && !in_order && !wire::is_data(body);
        if verdict != Verdict::Dropped && !comes_again {
            self.log_traffic(from, body.len(), wire::is_rts(body));
        }
        match verdict {
            Verdict::Dropped => {}
            Verdict::Now => self.hand_over(from, body),
            Verdict::Ahead if wire::is_data(body) => {
                self.peers.taken_ahead(from, seq);
                self.handle_message(from, body);
            }
            // Another path carries the messages before it.
            Verdict::Ahead if in_order => self.peers.hold(from, seq, body),
            // It comes again in its turn on this path.
            Verdict::Ahead => return false,
        }
        true
    }

    fn message(&mut self, src: SocketAddr, payload: &[u8]) {
        self.early(src, payload, true);
    }

    /// An eager message or a chunk behind the longest header (EAGER's and RTS's).
    fn max_message(&self) -> usize {
        EAGER_MAX.max(CHUNK) + MATCH_HEADER + peer::HEADER
    }

    /// A chunk cut into several datagrams (an MTU below the chunk) goes into the receive
    /// segment by segment: no reassembly buffer, no second copy. A duplicate of a chunk
    /// already whole is reassembled and dropped whole. Its bytes count, and its number is
    /// settled, only once it is whole ([`RdReceiver::segmented`]): a rail that fails mid-chunk
    /// leaves it cut short, and the copy sent again over another rail must still be taken.
    fn segment(&mut self, src: SocketAddr, head: &[u8], offset: usize, bytes: &[u8]) -> bool {
        let Some(head) = head.get(peer::HEADER..) else {
            return false;
        };
        if offset > 0 {
            // A taken message's first segment held the whole per-peer header.
            let offset = offset.saturating_sub(peer::HEADER);
            let from = self.peers.slot(src);
            return self.take_segment(from, head, offset, bytes);
        }
        let from = self.peers.slot(src);
        let (verdict, _, body) = self.peers.arrive(from, bytes);
        match verdict {
            Verdict::Now | Verdict::Ahead => self.take_segment(from, head, 0, body),
            Verdict::Dropped => false,
        }
    }

    fn segmented(&mut self, src: SocketAddr, head: &[u8], len: usize) {
        let Some(from) = self.peers.find(src) else {
            return;
        };
        let (verdict, seq, body) = self.peers.arrive(from, head);
        if verdict == Verdict::Dropped {
            // Another copy of it came whole first, and counted.
            return;
        }
        if let Some(payload) = len.checked_sub(peer::HEADER) {
            self.segments_whole(from, body, payload);
        }
        match verdict {
            Verdict::Now => self.hand_over_rest(from),
            _ => self.peers.taken_ahead(from, seq),
        }
    }

    /// A rendezvous chunk over a connection, whose receive is posted and has room for it, is
    /// read from the socket straight into the receive.
    fn in_place(&mut self, src: SocketAddr, head: &[u8], len: usize) -> bool {
        let Some(chunk) = len.checked_sub(IN_PLACE_HEADERS) else {
            return false;
        };
        let Some(from) = self.peers.find(src) else {
            return false;
        };
        self.peers.would_take(from, head)
            && self
                .in_place_target(from, head)
                .is_some_and(|(d, at)| fits(d, at, chunk))
    }

    fn read_in_place(
        &mut self,
        src: SocketAddr,
        head: &[u8],
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let target = self
            .peers
            .find(src)
            .and_then(|from| self.in_place_target(from, head));
        let placed = match (target, offset.checked_sub(IN_PLACE_HEADERS)) {
            (Some((d, at)), Some(past)) => {
                d.recv
                    .mem
                    .read_at(d.offset + at as usize + past, max, read)?
            }
            _ => 0,
        };
        if placed > 0 {
            return Ok(placed);
        }
        // Its receive went (cancelled, the endpoint closing): the bytes are read and dropped.
        read(&mut vec![0; max.min(CHUNK)])
    }

    fn placed(&mut self, src: SocketAddr, head: &[u8], len: usize) {
        let from = self.peers.slot(src);
        let (verdict, seq, body) = self.peers.arrive(from, head);
        if verdict == Verdict::Dropped {
            return;
        }
        self.log_traffic(from, len - peer::HEADER, false);
        if verdict == Verdict::Ahead {
            self.peers.taken_ahead(from, seq);
        }
        self.heard_from(from);
        match wire::parse(body) {
            Ok((
                _,
                Msg::Data {
                    recv_id,
                    offset,
                    payload,
                },
            )) => {
                self.stats.chunks_in_place += 1;
                self.data_arrived(from, recv_id, offset, payload, len - IN_PLACE_HEADERS)
            }
            _ => self.stats.malformed += 1,
        }
        if verdict == Verdict::Now {
            self.hand_over_rest(from);
        }
    }
}

/// The connections lend arrivals as the queue pair does, and look peers up in the table.
impl crate::path::Receiver for State {
    fn peers(&mut self) -> &mut PeerTable {
        &mut self.peers
    }
}

/// The headers in front of a chunk's bytes: the per-peer header and DATA's.
const IN_PLACE_HEADERS: usize = peer::HEADER + wire::DATA_HEADER;

impl State {
    /// The delivery and the offset in it of the DATA chunk that starts with `head` (behind its
    /// per-peer header), if its receive is posted and from `from`.
    pub(super) fn in_place_target(
        &self,
        from: SlotId,
        head: &[u8],
    ) -> Option<(&Delivery<Recv>, u64)> {
        let Ok((
            _,
            Msg::Data {
                recv_id, offset, ..
            },
        )) = wire::parse(head.get(peer::HEADER..)?)
        else {
            return None;
        };
        let r = self.rx.rndv.get(&recv_id).filter(|r| r.from == from)?;
        Some((&r.delivery, offset))
    }
}

impl State {
    /// Hands over `body`, whose turn it is, and the held messages whose turn comes after it.
    pub(super) fn hand_over(&mut self, from: SlotId, body: &[u8]) {
        self.handle_message(from, body);
        self.hand_over_rest(from);
    }

    /// The message whose turn it was is handled: hands over the held ones that follow.
    pub(super) fn hand_over_rest(&mut self, from: SlotId) {
        self.peers.handed(from);
        while let Some(held) = self.peers.ready(from) {
            self.handle_message(from, &held);
        }
    }

    /// The receive and offset a segmented chunk (`head`, past the per-peer header) goes to,
    /// and whether it is pushed; `None` for a pushed one whose receive is not known (or
    /// ended: a short receive is full) and for anything else.
    fn chunk_target(&self, from: SlotId, head: &[u8]) -> Option<(u64, u64, bool)> {
        match wire::parse(head) {
            Ok((
                _,
                Msg::Data {
                    recv_id, offset, ..
                },
            )) => Some((recv_id, offset, false)),
            Ok((_, Msg::Push { handle, offset, .. })) => {
                let recv_id = *self.rx.pushing_into.get(&(from, handle))?;
                Some((recv_id, offset, true))
            }
            _ => None,
        }
    }

    /// A segment of a chunk, copied into its receive (see [`RdReceiver::segment`]); `head`
    /// and `offset` are past the per-peer header. Counted once the chunk is whole.
    pub(super) fn take_segment(
        &mut self,
        from: SlotId,
        head: &[u8],
        offset: usize,
        bytes: &[u8],
    ) -> bool {
        let Some((recv_id, chunk_at, pushed)) = self.chunk_target(from, head) else {
            // A pushed chunk taken, whose receive ended since, goes on being taken (and
            // dropped); anything else is not taken.
            return offset > 0;
        };
        if offset == 0 {
            self.heard_from(from);
        }
        // The first segment starts with the header; later ones are payload only.
        let (skip, at) = match offset.checked_sub(wire::DATA_HEADER) {
            Some(at) => (0, at),
            None => (wire::DATA_HEADER - offset, 0),
        };
        let (Some(payload), Some(at)) = (bytes.get(skip..), chunk_at.checked_add(at as u64)) else {
            self.stats.malformed += 1;
            return true;
        };
        if pushed {
            let room = self.push_room(recv_id, at, payload.len());
            match room {
                Some(n) => self.place(from, recv_id, at, &payload[..n], n),
                None => false,
            };
            let first = u64::from(offset == 0);
            match room {
                Some(_) => self.stats.push_placed += first,
                None => self.stats.push_dropped += first,
            }
        } else {
            self.place(from, recv_id, at, payload, payload.len());
        }
        true
    }

    /// A chunk taken segment by segment is whole (`len` bytes behind the per-peer header,
    /// which `head` starts past): its bytes count.
    fn segments_whole(&mut self, from: SlotId, head: &[u8], len: usize) {
        let Some((recv_id, chunk_at, pushed)) = self.chunk_target(from, head) else {
            return;
        };
        let Some(n) = len.checked_sub(wire::DATA_HEADER) else {
            return;
        };
        let n = if pushed {
            self.push_room(recv_id, chunk_at, n)
        } else {
            self.rx
                .rndv
                .get(&recv_id)
                .filter(|r| r.from == from && fits(&r.delivery, chunk_at, n))
                .map(|_| n)
        };
        if let Some(n) = n {
            self.count_arrived(recv_id, n);
        }
    }
}
