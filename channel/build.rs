//! Generates the libfabric bindings from the system headers (Debian `libfabric-dev`) and links
//! the provider against the core it is loaded by.

use std::env;
use std::path::PathBuf;

use bindgen::callbacks::{IntKind, ParseCallbacks};

/// libfabric's flag and capability macros are all 64-bit masks; bindgen would otherwise type
/// each by its value, leaving `FI_MSG` a u32 and `FI_SOURCE` a u64.
#[derive(Debug)]
struct MacrosAreU64;

impl ParseCallbacks for MacrosAreU64 {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        name.starts_with("FI_").then_some(IntKind::U64)
    }
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    // DL providers link back to the core (as upstream's do). The soname binds to whichever
    // libfabric.so.1 the MPI library already loaded, 1.17 or 2.x.
    println!("cargo:rustc-link-lib=dylib=fabric");
    // The core dlcloses providers at fi_fini; unloading Rust code with live thread-local
    // destructors or threads crashes, so the DSO stays mapped until exit.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .parse_callbacks(Box::new(MacrosAreU64))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_type("fi_.*|fid_.*|fid")
        .allowlist_var("FI_.*")
        .allowlist_function(
            "fi_version|fi_dupinfo|fi_freeinfo|fi_strerror|fi_param_define|fi_param_get|\
             fi_log_enabled|fi_log",
        )
        // Enums as plain integer constants: a C caller may store any value in an enum field,
        // and a Rust enum holding an unlisted value would be undefined behaviour.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on the libfabric headers; is libfabric-dev installed?");

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");
}
