//! The process's memory as `/proc` shows it, read at the moment of a report.

use serde::Serialize;

/// Bytes, from `/proc/self/status` and `/proc/self/smaps_rollup`; descriptors held. A figure
/// the kernel does not offer is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcMemory {
    pub vm_rss: u64,
    pub vm_hwm: u64,
    pub rss_anon: u64,
    pub rss_file: u64,
    pub pss: u64,
    pub pss_anon: u64,
    /// Open file descriptors, and of them sockets.
    pub fds: u64,
    pub sockets: u64,
}

/// The value of `key` (in kB) in a `/proc` key-value text, in bytes.
fn kb(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or(0, |k| k * 1024)
}

/// Reads them now.
pub fn read() -> ProcMemory {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let (mut fds, mut sockets) = (0, 0);
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for e in dir.flatten() {
            fds += 1;
            let link = std::fs::read_link(e.path()).unwrap_or_default();
            sockets += u64::from(link.to_string_lossy().starts_with("socket:"));
        }
    }
    ProcMemory {
        vm_rss: kb(&status, "VmRSS"),
        vm_hwm: kb(&status, "VmHWM"),
        rss_anon: kb(&status, "RssAnon"),
        rss_file: kb(&status, "RssFile"),
        pss: kb(&rollup, "Pss"),
        pss_anon: kb(&rollup, "Pss_Anon"),
        fds,
        sockets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kb_fields() {
        let t = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nPss_Anon:   7 kB\n";
        assert_eq!(kb(t, "VmRSS"), 1024 * 1024);
        assert_eq!(kb(t, "VmHWM"), 2048 * 1024);
        assert_eq!(kb(t, "Pss"), 0, "Pss_Anon is not Pss");
        assert_eq!(kb(t, "Pss_Anon"), 7 * 1024);
    }

    #[test]
    fn reads_this_process() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let m = read();
        assert!(m.vm_rss > 0 && m.vm_hwm >= m.vm_rss, "{m:?}");
        assert!(m.rss_anon > 0 && m.pss > 0, "{m:?}");
        assert!(m.sockets >= 1 && m.fds > m.sockets, "{m:?}");
        drop(sock);
    }
}
