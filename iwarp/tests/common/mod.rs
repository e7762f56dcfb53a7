//! Helpers shared by the verbs integration tests (`verbs_ud`, `verbs_rc`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iwarp::verbs::*;

/// Loopback with port 0: bind or listen here to get a free port.
pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A payload that differs for every size and position.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(seed as u32 * 7 + (i >> 8) as u32) as u8
        })
        .collect()
}

/// Polls until one completion arrives; panics after `deadline`.
pub fn wait_one_within(qp: &mut impl QueuePair, deadline: Duration) -> WorkCompletion {
    let start = Instant::now();
    let mut out = Vec::with_capacity(4);
    loop {
        if qp.poll_cq(&mut out, 1).unwrap() == 1 {
            return out.pop().unwrap();
        }
        assert!(
            start.elapsed() < deadline,
            "no completion within {deadline:?}"
        );
    }
}

/// Posts a receive into `buf`.
pub fn post_buf(qp: &mut impl QueuePair, wr_id: u64, buf: Vec<u8>) {
    qp.post_recv(RecvWr { wr_id, buf }).unwrap();
}

/// Posts a signaled one-byte send (`b"x"`), for checking what a queue pair refuses.
pub fn post_x(
    qp: &mut impl QueuePair,
    wr_id: u64,
    ah: Option<AddressHandle>,
) -> Result<(), VerbsError> {
    qp.post_send(SendWr {
        wr_id,
        opcode: SendOpcode::Send,
        data: b"x",
        ah,
        signaled: true,
    })
}

/// Asserts that `err` is `InvalidState` naming `state`.
pub fn assert_invalid_state(err: &VerbsError, want: QpState) {
    assert!(
        matches!(err, VerbsError::InvalidState { state, .. } if *state == want),
        "{err:?}"
    );
}

/// A signaled send of `b"abc"`.
pub fn abc_send(wr_id: u64, ah: Option<AddressHandle>) -> SendWr<'static> {
    SendWr {
        wr_id,
        opcode: SendOpcode::Send,
        data: b"abc",
        ah,
        signaled: true,
    }
}

/// For a queue pair with a send queue of two: posts sends 1 and 2, checks that send 3 is
/// refused while their completions are unpolled, polls both, then posts send 3. Returns the
/// two polled completions.
pub fn fill_send_queue_of_two(
    qp: &mut impl QueuePair,
    ah: Option<AddressHandle>,
) -> Vec<WorkCompletion> {
    qp.post_send(abc_send(1, ah)).unwrap();
    qp.post_send(abc_send(2, ah)).unwrap();
    // Two completions not yet polled hold both slots.
    assert!(matches!(
        qp.post_send(abc_send(3, ah)),
        Err(VerbsError::QueueFull)
    ));
    let mut out = Vec::new();
    assert_eq!(qp.poll_cq(&mut out, 8).unwrap(), 2);
    qp.post_send(abc_send(3, ah)).unwrap();
    out
}

/// An RC receiver (receiver mode) that takes in place every message whose first byte is `P`,
/// each read at most `run` bytes per call, and records every message whole, in the order
/// handed over.
pub struct InPlaceRecorder {
    pub got: Vec<Vec<u8>>,
    /// Messages that came in place.
    pub placed: usize,
    pub run: usize,
    current: Option<Vec<u8>>,
}

impl InPlaceRecorder {
    pub fn new(run: usize) -> Self {
        InPlaceRecorder {
            got: Vec::new(),
            placed: 0,
            run,
            current: None,
        }
    }

    /// Whether a message is being read in place.
    pub fn reading(&self) -> bool {
        self.current.is_some()
    }
}

impl RdReceiver for InPlaceRecorder {
    fn early(&mut self, _: SocketAddr, _: &[u8], _: bool) -> bool {
        panic!("RC lends whole messages in order only");
    }
    fn message(&mut self, _: SocketAddr, payload: &[u8]) {
        assert!(
            self.current.is_none(),
            "a message overtook one read in place"
        );
        self.got.push(payload.to_vec());
    }
    fn max_message(&self) -> usize {
        1 << 24
    }
    fn in_place(&mut self, _: SocketAddr, head: &[u8], len: usize) -> bool {
        if head.first() != Some(&b'P') {
            return false;
        }
        assert!(self.current.is_none(), "one message in place at a time");
        let mut t = vec![0; len];
        t[..head.len()].copy_from_slice(head);
        self.current = Some(t);
        true
    }
    fn read_in_place(
        &mut self,
        _: SocketAddr,
        head: &[u8],
        offset: usize,
        max: usize,
        read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let t = self.current.as_mut().expect("a message taken in place");
        assert_eq!(head, &t[..head.len()]);
        assert!(offset >= head.len() && offset + max <= t.len());
        read(&mut t[offset..offset + max.min(self.run)])
    }
    fn placed(&mut self, _: SocketAddr, head: &[u8], len: usize) {
        let t = self.current.take().expect("a message taken in place");
        assert_eq!((&t[..head.len()], t.len()), (head, len));
        self.got.push(t);
        self.placed += 1;
    }
}

/// Message `i` of `n` bytes for [`InPlaceRecorder`]: `P` (taken in place) for even `i`, then
/// `i`, then a pattern.
pub fn in_place_message(i: usize, n: usize) -> Vec<u8> {
    let mut m = vec![if i.is_multiple_of(2) { b'P' } else { b'M' }];
    m.extend_from_slice(&(i as u32).to_le_bytes());
    m.extend_from_slice(&pattern(n.saturating_sub(5), i as u8));
    m.truncate(n);
    m
}
