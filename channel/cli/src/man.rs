//! fi_diwarp(7), generated from the table the provider registers its parameters from
//! (`diwarp_fi::params::PARAMS`), so the page and `fi_info -e` cannot drift apart.

use std::fmt::Write;

use diwarp_fi::params::PARAMS;

/// Escapes text for roff: backslashes, and a leading `.` or `'` that would read as a request.
fn roff(s: &str) -> String {
    let s = s.replace('\\', r"\e").replace('-', r"\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!(r"\&{s}")
    } else {
        s
    }
}

const BODY: &str = r#".SH NAME
fi_diwarp \- the diwarp fabric provider: datagram\-iWARP over UDP, iWARP over TCP
.SH OVERVIEW
diwarp implements iWARP (RDMAP, DDP, MPA) in software for commodity Ethernet.
Every endpoint starts with one UDP socket, a datagram queue pair with its own
reliability (sequence numbers, acknowledgements, retransmission), over which it
reaches every peer.
The peers it talks to most get a TCP connection each (an RC queue pair, standard
iWARP over MPA) up to a cap, and lose it when they go cold.
One message order spans both paths: a message is handed to the application in
the order it was sent whichever path carried it.
.SH SUPPORTED FEATURES
.TP
.B Endpoint types
FI_EP_RDM.
.TP
.B Capabilities
FI_MSG, FI_TAGGED, FI_RMA (read, write, remote read and write), FI_MULTI_RECV,
FI_DIRECTED_RECV, FI_SOURCE, FI_LOCAL_COMM, FI_REMOTE_COMM.
.TP
.B Completion
Sends complete once the peer has acknowledged them, so FI_DELIVERY_COMPLETE,
FI_TRANSMIT_COMPLETE and FI_INJECT_COMPLETE all hold; messages up to the eager
size are injected.
.TP
.B Address format
FI_ADDR_STR names carrying each endpoint's UDP address, its TCP listening port
and a nonce that tells a restarted peer from its predecessor.
.TP
.B Progress
FI_PROGRESS_MANUAL for data, with a timer thread that keeps acknowledgements
and retransmissions going while the application computes.
.SH SECURITY
By default a job trusts what reaches its sockets once session ids and epochs
match, which anyone who sees one datagram can forge.
Authenticated mode (FI_DIWARP_AUTH, on whenever FI_DIWARP_AUTH_KEY or
FI_DIWARP_AUTH_KEY_FILE is set; diwarp run \-\-auth makes a fresh key per job)
(or a domain_attr.auth_key the application hands the domain, which comes first)
puts a tag from the job's key (AES\-128\-GCM\-SIV) on every datagram, bound to
its receiver, in place of the CRC32c.
A datagram without it (forged, altered, redirected, from another job) is dropped
before it is read and counted as dropped_unauthenticated; a replay is dropped
by the sequence window.
A rank with another key is never heard and its operations fail with FI_EIO
after FI_DIWARP_PEER_TIMEOUT_MS (injected and copied sends as errors without a
context), after one line on stderr that says a peer probably has another key.
An RC connection proves the key at MPA start-up (both ends, over both ends' fresh
nonces; the initiator's proof is its first FPDU) and then keeps the FPDU CRC;
one that fails its proof is closed and the peer stays on datagrams.
It gives no confidentiality (data is not encrypted), and an attacker on the
path can still drop packets.
FI_LOG_LEVEL does not print the key (the provider reads it from the
environment itself); a key file must be its owner's and mode 600 or 400.
.SH LIMITATIONS
FI_ATOMIC is not offered.
Ranks of different diwarp builds refuse each other at address insertion.
.SH USAGE
MPICH: FI_PROVIDER=diwarp FI_PROVIDER_PATH=\fIdir\fR mpiexec \-n 4 ./prog
.br
Open MPI: mpirun \-\-mca pml cm \-\-mca mtl ofi \-\-mca mtl_ofi_provider_include diwarp
\-x FI_PROVIDER=diwarp \-x FI_PROVIDER_PATH=\fIdir\fR \-n 4 ./prog
.br
Or: diwarp run \-\-mpi mpich|openmpi \-n 4 \-\- ./prog, which also kills every rank
after a timeout; across hosts, diwarp run \-\-hosts \fIa\fR,\fIb\fR (or \-\-hostfile
\fIfile\fR) \-n 8 \-\- ./prog, after diwarp doctor \-\-hosts \fIa\fR,\fIb\fR.
.SH PORTS
Each rank listens on one UDP port per rail (FI_DIWARP_IFACE), on the rail's address,
and on one TCP port (its RC listener, on the first rail's address; none when
FI_DIWARP_MODE is ud).
A job of N ranks per host with R rails needs N*R UDP ports and N TCP ports open on
each host.
FI_DIWARP_PORT_RANGE confines both to a range; an endpoint that finds no free port
in it, or a malformed range, does not open, and says so naming the variable.
What a rank connects out from (its RC connections, its per\-peer UDP sockets,
FI_DIWARP_CONNECTED_PEERS) takes ephemeral source ports: the host's firewall must
let out what the host starts, and in what answers it.
libdiwarp\-sockets.so opens no port of its own: a switched socket keeps the
program's.
.SH RUNTIME PARAMETERS
"#;

const TAIL: &str = r#".SH SEE ALSO
fi_provider(7), fi_info(1), fi_getinfo(3)
"#;

pub fn page() -> String {
    let mut out = format!(
        ".TH fi_diwarp 7 \"\" \"diwarp {}\" \"diwarp\"\n",
        env!("CARGO_PKG_VERSION")
    );
    out.push_str(BODY);
    for p in PARAMS {
        let _ = writeln!(
            out,
            ".TP\n.B {}\n({})",
            roff(&p.env_name()),
            crate::info::kind_name(p.kind)
        );
        let _ = writeln!(out, "{}.", roff(p.help));
        let _ = writeln!(out, "Default: {}.", roff(p.default.text()));
    }
    out.push_str(TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_is_on_the_page_with_its_default() {
        let page = page();
        for p in PARAMS {
            let name = roff(&p.env_name());
            let at = page
                .find(&format!(".B {name}\n"))
                .unwrap_or_else(|| panic!("{name} missing"));
            let entry = &page[at..];
            let entry = &entry[..entry[3..].find(".TP").map_or(entry.len(), |i| i + 3)];
            let default = p.default.text();
            assert!(
                entry.contains(&format!("Default: {}.", roff(default))),
                "{entry}"
            );
        }
    }

    #[test]
    fn no_line_reads_as_a_request_by_accident() {
        assert_eq!(roff(".x"), r"\&.x");
        assert_eq!(roff(r"a\b-c"), r"a\eb\-c");
        for line in page().lines() {
            if let Some(rest) = line.strip_prefix('.') {
                let req = rest.split_whitespace().next().unwrap_or("");
                assert!(["TH", "SH", "TP", "B", "br"].contains(&req), "{line}");
            }
        }
    }
}
