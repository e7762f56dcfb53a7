//! What one RC connection (iWARP over MPA on a TCP socket, [`iwarp::verbs`]) costs the two
//! ranks it joins: the queue pairs' own heap and the kernel's socket memory, idle and with a
//! burst the receiver has not read yet. `scripts/mem-report --rc-cost` projects the `rc` and
//! `hybrid` modes with it; `diwarp-rc-cost` prints it.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use iwarp::verbs::{QpConfig, QueuePair, RcQp, SendOpcode, SendWr};
use serde::Serialize;

use super::kernel::{self, KernelMemory};
use crate::raw::heap::provider_heap;

/// Bytes per connection end (the mean of the two ends).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RcCost {
    /// Heap: the queue pair, its MPA decoder and send backlog. The kernel's own socket
    /// structures (a few KiB per TCP socket) are not in `SO_MEMINFO`, nor here.
    pub user_idle: u64,
    /// Kernel socket memory of an idle connection.
    pub kernel_idle: u64,
    /// With `burst` bytes sent and not yet read.
    pub burst: u64,
    pub user_busy: u64,
    pub kernel_busy: u64,
    /// The sockets' buffer limits (`SO_SNDBUF` + `SO_RCVBUF`): the most the kernel may hold.
    pub kernel_limit: u64,
}

impl RcCost {
    /// The cost a projection takes: user and kernel memory with the burst in flight.
    pub fn busy(&self) -> u64 {
        self.user_busy + self.kernel_busy
    }
}

fn kernel_of(qps: &[&RcQp]) -> KernelMemory {
    let fds: Vec<_> = qps.iter().filter_map(|q| q.socket()).collect();
    kernel::read(&fds)
}

/// Connects two RC queue pairs over loopback and measures them. The heap is counted
/// process-wide: call it where nothing else allocates meanwhile (its own program).
pub fn measure(burst: usize) -> std::io::Result<RcCost> {
    let h0 = provider_heap() as i64;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let acceptor = std::thread::spawn(move || {
        let mut b = RcQp::create(QpConfig::default()).map_err(std::io::Error::other)?;
        b.accept(&listener).map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(b)
    });
    let mut a = RcQp::create(QpConfig::default()).map_err(std::io::Error::other)?;
    a.connect(addr, b"").map_err(std::io::Error::other)?;
    let b = acceptor.join().expect("the acceptor does not panic")?;
    let idle = kernel_of(&[&a, &b]);
    let h1 = provider_heap() as i64;
    // The receiver posts nothing and is not polled: the burst waits in the kernel and in the
    // sender's backlog.
    let chunk = vec![0x5a_u8; 64 * 1024];
    let mut posted = 0;
    while posted < burst {
        let n = chunk.len().min(burst - posted);
        a.post_send(SendWr {
            wr_id: posted as u64,
            opcode: SendOpcode::Send,
            data: &chunk[..n],
            ah: None,
            signaled: false,
        })
        .map_err(std::io::Error::other)?;
        posted += n;
    }
    let mut wcs = Vec::new();
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let _ = a.poll_cq(&mut wcs, 16);
        wcs.clear();
    }
    let busy = kernel_of(&[&a, &b]);
    let h2 = provider_heap() as i64;
    let chunk_bytes = chunk.len() as i64;
    drop((a, b));
    // The queue pairs live on this stack here; the provider would keep each in its tables.
    let own = std::mem::size_of::<RcQp>() as u64;
    Ok(RcCost {
        user_idle: ((h1 - h0).max(0) / 2) as u64 + own,
        kernel_idle: idle.held / 2,
        burst: burst as u64,
        user_busy: ((h2 - h0 - chunk_bytes).max(0) / 2) as u64 + own,
        kernel_busy: busy.held / 2,
        kernel_limit: (busy.rcvbuf + busy.sndbuf) / 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel holds the burst the receiver has not read (the heap figures need a process
    /// of their own: `diwarp-rc-cost`).
    #[test]
    fn a_burst_waits_in_the_kernel() {
        let c = measure(1 << 20).unwrap();
        assert!(c.kernel_busy * 2 >= 512 * 1024, "{c:?}");
        assert!(c.kernel_limit > 0 && c.kernel_idle < c.kernel_busy, "{c:?}");
    }
}
