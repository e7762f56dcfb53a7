//! Logging through libfabric's `fi_log`, so diwarp's messages obey `FI_LOG_LEVEL`, `FI_LOG_PROV`
//! and `FI_LOG_SUBSYS` like every other provider's.
//!
//! Use [`diag!`](crate::diag): `diag!(Warn, Av, "bad address {i}")`. The message is only formatted
//! when the core would print it. The lines go to a [`Sink`] that `fi_prov_ini` installs; until
//! one is (unit tests) nothing is printed.

use std::fmt;
use std::sync::OnceLock;

/// libfabric's log levels, most important first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warn,
    Trace,
    Info,
    Debug,
}

/// libfabric's log subsystems.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subsys {
    Core,
    Fabric,
    Domain,
    EpCtrl,
    EpData,
    Av,
    Cq,
    Eq,
    Mr,
    Cntr,
}

/// Where log lines go: libfabric's `fi_log`, installed by the C layer when the core loads the
/// provider, so that this module stays below everything that logs.
pub trait Sink: Sync {
    fn enabled(&self, level: Level, subsys: Subsys) -> bool;
    fn emit(&self, level: Level, subsys: Subsys, func: &str, line: u32, msg: &str);
}

static SINK: OnceLock<&'static dyn Sink> = OnceLock::new();

/// Sends every later line to `sink` (the first one installed stays).
pub fn install(sink: &'static dyn Sink) {
    let _ = SINK.set(sink);
}

pub fn enabled(level: Level, subsys: Subsys) -> bool {
    SINK.get().is_some_and(|s| s.enabled(level, subsys))
}

/// Formats and emits one message; callers check [`enabled`] first (the macro does).
pub fn write(level: Level, subsys: Subsys, func: &str, line: u32, args: fmt::Arguments<'_>) {
    if let Some(sink) = SINK.get() {
        let mut msg = fmt::format(args);
        msg.push('\n');
        sink.emit(level, subsys, func, line, &msg);
    }
}

/// A setup that cannot work (ranks of different builds): logged as a warning, and said on
/// stderr once per process when warnings are off, because MPI then stops with a message of
/// its own that does not say why.
pub fn misconfigured(subsys: Subsys, func: &str, line: u32, args: fmt::Arguments<'_>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    if enabled(Level::Warn, subsys) {
        write(Level::Warn, subsys, func, line, args);
    } else if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("diwarp: {args}");
    }
}

/// `diag!(Level, Subsys, "format", args...)`: logs through libfabric when that level is on.
#[macro_export]
macro_rules! diag {
    ($level:ident, $subsys:ident, $($arg:tt)+) => {{
        let level = $crate::log::Level::$level;
        let subsys = $crate::log::Subsys::$subsys;
        if $crate::log::enabled(level, subsys) {
            $crate::log::write(level, subsys, module_path!(), line!(), format_args!($($arg)+));
        }
    }};
}
