//! `diwarp info`: the version, the provider this command would load, and every `FI_DIWARP_*`
//! parameter with its default, its value here and where that value comes from.

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use diwarp_fi::params::{ParamKind, ParamSpec, ParamValue, PARAMS};

use crate::provider;

#[derive(Args)]
pub struct InfoArgs {
    /// The directory of libdiwarp-fi.so to report on.
    #[arg(long, env = "DIWARP_PROVIDER_DIR")]
    provider_dir: Option<PathBuf>,
    /// Also print each parameter's description.
    #[arg(short, long)]
    verbose: bool,
}

/// One parameter as this process's environment sets it.
pub struct Setting {
    pub spec: &'static ParamSpec,
    pub value: String,
    pub source: String,
}

pub fn kind_name(k: ParamKind) -> &'static str {
    match k {
        ParamKind::Str | ParamKind::Secret => "string",
        ParamKind::Int => "integer",
        ParamKind::Bool => "boolean (0/1, yes/no, true/false, on/off)",
        ParamKind::Size => "size",
    }
}

/// Each parameter's value under `lookup` (the environment, as libfabric reads it).
pub fn settings(lookup: &dyn Fn(&str) -> Option<String>) -> Vec<Setting> {
    PARAMS
        .iter()
        .map(|spec| match lookup(&spec.env_name()) {
            Some(raw) if ParamValue::parse(spec.kind, &raw).is_some() => Setting {
                spec,
                value: raw,
                source: "environment".into(),
            },
            Some(raw) => Setting {
                spec,
                source: format!("environment, but not a valid {}", kind_name(spec.kind)),
                value: format!("{raw:?}"),
            },
            None => Setting {
                spec,
                value: spec.default.text().into(),
                source: "default".into(),
            },
        })
        .collect()
}

pub fn main(a: &InfoArgs) -> ExitCode {
    let mut out = String::new();
    let version = diwarp_fi::info::provider_version();
    let _ = writeln!(
        out,
        "diwarp {} (libfabric provider \"{}\", version {}.{})",
        env!("CARGO_PKG_VERSION"),
        diwarp_fi::info::PROVIDER_NAME,
        version >> 16,
        version & 0xffff
    );
    let found = provider::locate(a.provider_dir.as_deref());
    let _ = match &found {
        Ok(f) => writeln!(
            out,
            "provider: {} ({}; FI_PROVIDER_PATH={} FI_PROVIDER=diwarp)",
            f.dir.join(provider::FILE).display(),
            f.how,
            f.dir.display()
        ),
        Err(e) => writeln!(out, "provider: {e}"),
    };
    out.push_str(
        "parameters (libfabric reads them from the environment; `fi_info -e` lists them too):\n",
    );
    let width = PARAMS.iter().map(|p| p.env_name().len()).max().unwrap_or(0);
    for s in settings(&|k| std::env::var(k).ok()) {
        let _ = writeln!(
            out,
            "  {:width$}  {}  [{}]",
            s.spec.env_name(),
            s.value,
            s.source
        );
        if a.verbose {
            let _ = writeln!(out, "      {}", s.spec.help_with_default());
        }
    }
    rails(&mut out);
    crate::print(&out);
    if found.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The rails an endpoint here would bind, as `FI_DIWARP_IFACE` says.
fn rails(out: &mut String) {
    let iface = std::env::var("FI_DIWARP_IFACE").ok();
    match diwarp_fi::iface::resolve_rails(iface.as_deref()) {
        Ok(ips) => {
            out.push_str("rails (FI_DIWARP_IFACE):\n");
            for (i, ip) in ips.into_iter().enumerate() {
                let _ = writeln!(out, "  rail {i}: {}", diwarp_fi::iface::describe(ip));
            }
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "rails: FI_DIWARP_IFACE: {e} (an endpoint would not open)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_their_sources() {
        let s = settings(&|k| match k {
            "FI_DIWARP_MODE" => Some("rc".into()),
            "FI_DIWARP_RC_MAX" => Some("many".into()),
            _ => None,
        });
        assert_eq!(s.len(), PARAMS.len());
        let get = |n: &str| s.iter().find(|x| x.spec.env_name() == n).unwrap();
        assert_eq!(
            (
                get("FI_DIWARP_MODE").value.as_str(),
                get("FI_DIWARP_MODE").source.as_str()
            ),
            ("rc", "environment")
        );
        let bad = get("FI_DIWARP_RC_MAX");
        assert_eq!(bad.value, "\"many\"");
        assert_eq!(bad.source, "environment, but not a valid size");
        assert_eq!(get("FI_DIWARP_LINGER_MS").source, "default");
    }
}
