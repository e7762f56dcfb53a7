//! The measurement plan both processes follow, and the setup of each kind of link.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use bytes::Bytes;
use iwarp::verbs::{AddressHandle, QpConfig, QueuePair, RcQp, RdQp, UdQp};
use socket2::{Domain, Socket, Type};

use crate::args::{Args, Kind, Role};
use crate::control::Control;
use crate::link::{pattern, Link, Result};
use crate::raw::{Dest, RawTcp, RawUdp};
use crate::report::{Report, Row};
use crate::verbs_link::VerbsLink;

/// Datagrams in flight at once in a UD bandwidth window, so a window (about 2 MiB) fits the
/// receiver's socket buffer and unreliable kinds lose nothing on loopback.
const UDP_WINDOW_DATAGRAMS: usize = 32;
const UDP_CHUNK: usize = 65_000;
const SOCKET_BUFFER: usize = 4 << 20;

pub fn run_initiator(args: &Args) -> Result<()> {
    let listener = TcpListener::bind(local(args))?;
    let mut child = spawn_responder(args, listener.local_addr()?)?;
    let result = accept_within(&listener, args, Some(&mut child))
        .and_then(|stream| Control::new(stream, args.timeout()))
        .and_then(|mut control| measure_all(args, &mut control));
    if result.is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    let report = result?;
    if !status.success() {
        return Err(format!("responder exited with {status}").into());
    }
    report.print(args);
    if let Some(path) = &args.csv {
        report.write_csv(path)?;
    }
    Ok(())
}

pub fn run_responder(args: &Args) -> Result<()> {
    let addr = args.control.ok_or("responder needs --control")?;
    let mut control = Control::new(TcpStream::connect(addr)?, args.timeout())?;
    for kind in args.kinds() {
        let mut link = setup(kind, Role::Responder, args, &mut control)?;
        for &size in &args.sizes {
            respond_size(args, kind, link.as_mut(), size, &mut control)?;
        }
        sync(link.as_mut(), &mut control, "kind-done")?;
        if let Some(c) = link.counters() {
            eprintln!("{:>8} responder: {c}", kind.name());
        }
    }
    Ok(())
}

/// Starts the responder: this program again, behind `--responder-wrap` (e.g. `ip netns exec h2`
/// to put it on another test host), bound to `--responder-bind`.
fn spawn_responder(args: &Args, control: SocketAddr) -> Result<Child> {
    let exe = std::env::current_exe()?;
    let mut wrap = args
        .responder_wrap
        .as_deref()
        .unwrap_or("")
        .split_whitespace();
    let mut cmd = match wrap.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(wrap).arg(exe);
            cmd
        }
        None => Command::new(exe),
    };
    cmd.args(std::env::args_os().skip(1))
        .arg("--role=responder")
        .arg(format!(
            "--bind={}",
            args.responder_bind.unwrap_or(args.bind)
        ))
        .arg(format!("--control={control}"))
        .stdin(Stdio::null());
    Ok(cmd.spawn()?)
}

fn measure_all(args: &Args, control: &mut Control) -> Result<Report> {
    let mut report = Report::default();
    for kind in args.kinds() {
        let mut link = setup(kind, Role::Initiator, args, control)?;
        for &size in &args.sizes {
            let row = measure_size(args, kind, link.as_mut(), size, control).map_err(|e| {
                let counters = link
                    .counters()
                    .map(|c| format!(" [{c}]"))
                    .unwrap_or_default();
                format!("{} at {size} B: {e}{counters}", kind.name())
            })?;
            eprintln!(
                "{:>8} {:>9} B  {:>9.2} us  {:>9.1} MB/s",
                kind.name(),
                size,
                row.latency_us(),
                row.bandwidth_mbs()
            );
            report.rows.push(row);
        }
        sync(link.as_mut(), control, "kind-done")?;
        if let Some(c) = link.counters() {
            eprintln!("{:>8} initiator: {c}", kind.name());
        }
    }
    Ok(report)
}

fn window_for(args: &Args, kind: Kind, size: usize) -> usize {
    match kind {
        Kind::Ud | Kind::RawUdp | Kind::RawUdpConn => {
            let datagrams = size.div_ceil(UDP_CHUNK).max(1);
            (UDP_WINDOW_DATAGRAMS / datagrams).clamp(1, args.window)
        }
        // RD carries any size whole and its own flow control keeps the socket from overflowing.
        Kind::Rd | Kind::Rc | Kind::RawTcp => args.window,
    }
}

/// With --verify every message gets its own contents; otherwise one fixed buffer is reused.
fn message(args: &Args, size: usize, seq: u64) -> Option<Bytes> {
    args.verify.then(|| pattern(size, seq).into())
}

fn measure_size(
    args: &Args,
    kind: Kind,
    link: &mut dyn Link,
    size: usize,
    control: &mut Control,
) -> Result<Row> {
    let fixed = Bytes::from(vec![0x5a; size]);
    let iters = args.iters_for(size);
    let window = window_for(args, kind, size);
    let windows = (iters / window).max(2);
    sync(link, control, "warmup")?;
    ping(args, link, size, args.warmup.min(iters), &fixed)?;
    let mut row = Row::new(kind, size);
    for _ in 0..args.runs {
        sync(link, control, "pingpong")?;
        let start = Instant::now();
        ping(args, link, size, iters, &fixed)?;
        row.latency
            .push(start.elapsed().as_secs_f64() / (2 * iters) as f64);
    }
    for _ in 0..args.runs {
        sync(link, control, "stream")?;
        let start = Instant::now();
        for w in 0..windows {
            for j in 0..window {
                let msg = message(args, size, (w * window + j) as u64);
                link.send(msg.as_ref().unwrap_or(&fixed))?;
            }
            link.recv(1, None)?;
        }
        let bytes = (size * window * windows) as f64;
        row.bandwidth.push(bytes / start.elapsed().as_secs_f64());
    }
    Ok(row)
}

fn respond_size(
    args: &Args,
    kind: Kind,
    link: &mut dyn Link,
    size: usize,
    control: &mut Control,
) -> Result<()> {
    let fixed = Bytes::from(vec![0x5a; size]);
    let iters = args.iters_for(size);
    let window = window_for(args, kind, size);
    let windows = (iters / window).max(2);
    sync(link, control, "warmup")?;
    pong(args, link, size, args.warmup.min(iters), &fixed)?;
    for _ in 0..args.runs {
        sync(link, control, "pingpong")?;
        pong(args, link, size, iters, &fixed)?;
    }
    for _ in 0..args.runs {
        sync(link, control, "stream")?;
        for w in 0..windows {
            for j in 0..window {
                let msg = message(args, size, (w * window + j) as u64);
                link.recv(size, msg.as_deref())?;
            }
            link.send(&Bytes::from_static(&[1]))?;
        }
    }
    Ok(())
}

/// A control barrier, once this side's sends are all out, polling the link until the peer
/// arrives: queue pairs that send from `poll_cq` (RC's backlog, RD's window and ACKs) would
/// otherwise stall the peer.
fn sync(link: &mut dyn Link, control: &mut Control, name: &str) -> Result<()> {
    link.flush()?;
    control.barrier_while(name, || link.poll())
}

/// Initiator half of the ping-pong: send, then wait for the echo.
fn ping(args: &Args, link: &mut dyn Link, size: usize, iters: usize, fixed: &Bytes) -> Result<()> {
    for i in 0..iters as u64 {
        let msg = message(args, size, i);
        link.send(msg.as_ref().unwrap_or(fixed))?;
        link.recv(size, msg.as_deref())?;
    }
    Ok(())
}

/// Responder half: wait for the message, check it, send it back.
fn pong(args: &Args, link: &mut dyn Link, size: usize, iters: usize, fixed: &Bytes) -> Result<()> {
    for i in 0..iters as u64 {
        let msg = message(args, size, i);
        link.recv(size, msg.as_deref())?;
        link.send(msg.as_ref().unwrap_or(fixed))?;
    }
    Ok(())
}

/// Creates this side's end of a `kind` link, exchanging addresses over the control connection.
fn setup(kind: Kind, role: Role, args: &Args, control: &mut Control) -> Result<Box<dyn Link>> {
    let timeout = args.timeout();
    match kind {
        Kind::RawUdp | Kind::RawUdpConn => {
            let socket = udp_socket(args)?;
            control.send(&socket.local_addr()?.to_string())?;
            let peer: SocketAddr = control.recv()?.parse()?;
            let connected = kind == Kind::RawUdpConn;
            if connected {
                socket.connect(peer)?;
            }
            let link = RawUdp::new(socket, peer, connected, timeout)?;
            Ok(Box::new(link.with_dest(raw_dest(args))))
        }
        Kind::RawTcp => match role {
            Role::Responder => {
                let listener = TcpListener::bind(local(args))?;
                control.send(&listener.local_addr()?.to_string())?;
                let stream = accept_within(&listener, args, None)?;
                Ok(Box::new(
                    RawTcp::new(stream, timeout)?.with_dest(raw_dest(args)),
                ))
            }
            Role::Initiator => {
                let addr: SocketAddr = control.recv()?.parse()?;
                let stream = TcpStream::connect_timeout(&addr, timeout)?;
                Ok(Box::new(
                    RawTcp::new(stream, timeout)?.with_dest(raw_dest(args)),
                ))
            }
        },
        Kind::Ud => {
            let mut qp = UdQp::create(qp_config(args))?;
            let local = qp.attach_udp(udp_socket(args)?)?;
            let ah = swap_address_handles(control, local, qp.qpn())?;
            Ok(Box::new(VerbsLink::ud(qp, ah, timeout)?))
        }
        Kind::Rd => {
            let mut qp = RdQp::create(qp_config(args))?;
            let local = qp.attach_udp(udp_socket(args)?)?;
            let ah = swap_address_handles(control, local, qp.qpn())?;
            // Every message of a window has its receive posted, sized for the largest message.
            let largest = args.sizes.iter().copied().max().unwrap_or(1);
            let depth = args.window.max(1) + 1;
            let link = VerbsLink::rd(qp, ah, timeout, largest, depth)?;
            Ok(Box::new(link.owned_sends(!args.rd_copy)))
        }
        Kind::Rc => {
            let mut qp = RcQp::create(qp_config(args))?;
            match role {
                Role::Responder => {
                    let listener = TcpListener::bind(local(args))?;
                    control.send(&listener.local_addr()?.to_string())?;
                    qp.accept(&listener)?;
                }
                Role::Initiator => {
                    let addr: SocketAddr = control.recv()?.parse()?;
                    qp.connect(addr, b"iwarp-pingpong")?;
                }
            }
            Ok(Box::new(VerbsLink::rc(qp, timeout)))
        }
    }
}

/// Tells the peer our datagram address and QP number and learns its own.
fn swap_address_handles(
    control: &mut Control,
    local: SocketAddr,
    qpn: u32,
) -> Result<AddressHandle> {
    control.send(&format!("{local} {qpn}"))?;
    let line = control.recv()?;
    let (addr, qpn) = line.split_once(' ').ok_or("bad UD address line")?;
    Ok(AddressHandle {
        addr: addr.parse()?,
        qpn: qpn.parse()?,
    })
}

/// `--raw-dest`: message-sized receive buffers for the raw floors, as many as RD posts.
fn raw_dest(args: &Args) -> Option<Dest> {
    let largest = args.sizes.iter().copied().max().unwrap_or(1);
    args.raw_dest
        .then(|| Dest::new(args.window.max(1) + 1, largest))
}

fn qp_config(args: &Args) -> QpConfig {
    let mut c = QpConfig {
        crc: args.crc.on(),
        crc_same_host: args.crc_same_host,
        markers: args.markers.on(),
        connect_timeout: args.timeout(),
        ..QpConfig::default()
    };
    if let Some(n) = args.datagram_size {
        c.rd.max_datagram_size = n;
        c.fit_mtu = false;
    }
    c
}

/// Accepts one connection within `--timeout`, giving up early if `child` (the responder that
/// should connect) has exited, so a failed start never leaves the initiator waiting for ever.
fn accept_within(
    listener: &TcpListener,
    args: &Args,
    mut child: Option<&mut Child>,
) -> Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + args.timeout();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(status) = child.as_mut().map(|c| c.try_wait()).transpose()?.flatten() {
            return Err(format!("responder exited with {status} before connecting").into());
        }
        if Instant::now() > deadline {
            return Err("timed out waiting for the peer to connect".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// This side's address with any port.
fn local(args: &Args) -> SocketAddr {
    SocketAddr::new(args.bind, 0)
}

/// A UDP socket with buffers large enough for a bandwidth window.
fn udp_socket(args: &Args) -> Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    socket.set_recv_buffer_size(SOCKET_BUFFER)?;
    socket.set_send_buffer_size(SOCKET_BUFFER)?;
    socket.bind(&local(args).into())?;
    Ok(socket.into())
}
