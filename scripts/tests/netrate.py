"""What a link between two network namespaces carries: a TCP stream or a UDP blast for a few
seconds from one namespace to an address in the other, the receiver's rate, and for UDP what the
sender saw (datagrams taken, refused with EAGAIN or ENOBUFS, time blocked in sendto) next to
what the kernel dropped (the qdisc's drops, the sender's UDP SndbufErrors, the receiver's
RcvbufErrors). UDP goes one datagram per send, or with --gso N in runs of N (UDP_SEGMENT, as
diwarp sends). Several links at once run side by side, one sender and one receiver each.

As a command (root):
  netrate.py SENDER_NS RECEIVER_NS ADDR[,ADDR...] [--proto tcp|udp] [--seconds S]
             [--sndbuf BYTES] [--nonblock] [--recverr] [--size BYTES] [--gso N]
prints one JSON line per address and one for the sum. Inside the namespaces it runs itself as
`netrate.py recv ...` and `netrate.py send ...`."""
import argparse
import errno
import json
import os
import re
import select
import socket
import subprocess
import sys
import time

PORT = 47231
RCVBUF = 4 << 20
# Linux's values; Python's socket module names only some of them.
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
IP_RECVERR = getattr(socket, "IP_RECVERR", 11)
UDP_SEGMENT = 103


def recv(proto, addr, seconds):
    """Counts what reaches addr for `seconds` after the first byte (or until the sender closes
    the stream); prints bytes and the time they took."""
    if proto == "tcp":
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, PORT))
        ls.listen(1)
        print("ready", flush=True)
        s, _ = ls.accept()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        s.bind((addr, PORT))
        print("ready", flush=True)
    buf = bytearray(1 << 16)
    total = 0
    first = last = None
    deadline = None
    while True:
        wait = 10.0 if deadline is None else deadline - time.monotonic()
        if wait <= 0 or not select.select([s], [], [], wait)[0]:
            break
        n = s.recv_into(buf)
        if n == 0:
            break
        now = time.monotonic()
        if first is None:
            first, deadline = now, now + seconds + 1.0
        elif proto == "udp" and n == 1 and buf[0] == 0:
            break  # the sender's end marker
        else:
            total += n
            last = now
    took = (last - first) if first and last else 0.0
    print(json.dumps({"bytes": total, "seconds": took}), flush=True)


def send(proto, addr, seconds, size, sndbuf, nonblock, recverr, gso):
    """Sends to addr for `seconds` as fast as the socket takes it."""
    if proto == "tcp":
        s = socket.create_connection((addr, PORT))
        size = size or (1 << 16)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((addr, PORT))
        size = size or 1472
        if recverr:
            s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        if gso > 1:
            s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, size)
            size *= gso
    if sndbuf:
        s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, sndbuf)
    s.setblocking(not nonblock)
    data = b"\x01" * size
    counts = {"sent": 0, "bytes": 0, "eagain": 0, "enobufs": 0, "other_errors": 0,
              "blocked_seconds": 0.0,
              "sndbuf": s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)}
    if proto == "udp":
        s.send(b"\x02")  # starts the receiver's clock
    end = time.monotonic() + seconds
    slow = 0.0005  # a sendto longer than this was held up, not just slow
    while (now := time.monotonic()) < end:
        try:
            n = s.send(data)
            counts["sent"] += 1
            counts["bytes"] += n
        except BlockingIOError:
            counts["eagain"] += 1
            select.select([], [s], [], 0.01)
        except OSError as e:
            if e.errno == errno.ENOBUFS:
                counts["enobufs"] += 1
            else:
                counts["other_errors"] += 1
        took = time.monotonic() - now
        if took > slow:
            counts["blocked_seconds"] += took
    if proto == "udp":
        time.sleep(0.2)  # the queue drains before the marker, which then comes last
        s.setblocking(True)
        for _ in range(3):  # in case one is lost; the receiver is gone after the first
            try:
                s.send(b"\x00")
            except ConnectionRefusedError:
                break
    s.close()
    counts["blocked_seconds"] = round(counts["blocked_seconds"], 3)
    print(json.dumps(counts), flush=True)


def snmp_udp(ns):
    """The UDP counters of namespace ns (/proc/net/snmp)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
                         capture_output=True, text=True, check=True).stdout
    rows = [l.split()[1:] for l in out.splitlines() if l.startswith("Udp:")]
    return dict(zip(rows[0], map(int, rows[1])))


def qdisc_drops(ns, iface):
    """Packets the root qdisc of iface in namespace ns dropped so far."""
    out = subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", iface],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(dropped (\d+),", out)
    return int(m.group(1)) if m else 0


def iface_of(ns, addr):
    """The interface of namespace ns that reaches addr."""
    out = subprocess.run(["ip", "-n", ns, "-o", "route", "get", addr],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[out.index("dev") + 1]


def measure(sender_ns, receiver_ns, addrs, proto="tcp", seconds=2.0, size=0, sndbuf=0,
            nonblock=False, recverr=False, gso=0):
    """One sender in sender_ns per address in addrs (of receiver_ns), all at once. A dict per
    address: the receiver's rate in bit/s and, for UDP, the sender's counts and the kernel's
    drops (those of the sender's qdisc and UDP counters are shared by every link)."""
    me = os.path.abspath(__file__)
    py = sys.executable
    before = snmp_udp(sender_ns), snmp_udp(receiver_ns)
    ifaces = [iface_of(sender_ns, a) for a in addrs]
    drops = [qdisc_drops(sender_ns, i) for i in ifaces]
    receivers = []
    for a in addrs:
        p = subprocess.Popen(["ip", "netns", "exec", receiver_ns, py, me, "recv", proto, a,
                              str(seconds)], stdout=subprocess.PIPE, text=True)
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"receiver on {a} did not start")
        receivers.append(p)
    opts = ["--size", str(size), "--sndbuf", str(sndbuf), "--gso", str(gso)]
    opts += ["--nonblock"] * nonblock + ["--recverr"] * recverr
    senders = [subprocess.Popen(["ip", "netns", "exec", sender_ns, py, me, "send", proto, a,
                                 str(seconds)] + opts, stdout=subprocess.PIPE, text=True)
               for a in addrs]
    results = []
    for a, i, d, s, r in zip(addrs, ifaces, drops, senders, receivers):
        sent = json.loads(s.communicate(timeout=seconds + 30)[0])
        got = json.loads(r.communicate(timeout=seconds + 30)[0])
        res = {"addr": a, "iface": i, "proto": proto,
               "bits_per_second": round(8 * got["bytes"] / got["seconds"]) if got["seconds"] else 0,
               "received_bytes": got["bytes"]}
        if proto == "udp":
            res.update(sender=sent, qdisc_dropped=qdisc_drops(sender_ns, i) - d)
        results.append(res)
    if proto == "udp":
        after = snmp_udp(sender_ns), snmp_udp(receiver_ns)
        kernel = {"sender_SndbufErrors": after[0]["SndbufErrors"] - before[0]["SndbufErrors"],
                  "receiver_RcvbufErrors": after[1]["RcvbufErrors"] - before[1]["RcvbufErrors"]}
        for res in results:
            res.update(kernel)
    return results


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("recv", "send"):
        role, proto, addr, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
        if role == "recv":
            return recv(proto, addr, seconds)
        ap = argparse.ArgumentParser()
        ap.add_argument("--size", type=int, default=0)
        ap.add_argument("--sndbuf", type=int, default=0)
        ap.add_argument("--nonblock", action="store_true")
        ap.add_argument("--recverr", action="store_true")
        ap.add_argument("--gso", type=int, default=0)
        o = ap.parse_args(sys.argv[5:])
        return send(proto, addr, seconds, o.size, o.sndbuf, o.nonblock, o.recverr, o.gso)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sender_ns")
    ap.add_argument("receiver_ns")
    ap.add_argument("addrs", help="comma-separated addresses in the receiver's namespace")
    ap.add_argument("--proto", choices=("tcp", "udp"), default="tcp")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", type=int, default=0, help="bytes per send (TCP 64 KiB, UDP 1472)")
    ap.add_argument("--sndbuf", type=int, default=0, help="SO_SNDBUF to force (0: the default)")
    ap.add_argument("--nonblock", action="store_true")
    ap.add_argument("--recverr", action="store_true", help="IP_RECVERR on the UDP sender")
    ap.add_argument("--gso", type=int, default=0, help="UDP datagrams per send (UDP_SEGMENT)")
    o = ap.parse_args()
    res = measure(o.sender_ns, o.receiver_ns, o.addrs.split(","), o.proto, o.seconds, o.size,
                  o.sndbuf, o.nonblock, o.recverr, o.gso)
    for r in res:
        print(json.dumps(r))
    print(json.dumps({"sum_bits_per_second": sum(r["bits_per_second"] for r in res)}))


if __name__ == "__main__":
    main()
