//! Finds the libkiln.so.0 of an installed kiln wheel and links it, with a RUNPATH to its directory.
//!
//! In order: the KILN_LIB_DIR environment variable, `kiln --libs` (the wheel's command line),
//! `pkg-config --variable=libdir kiln` (with PKG_CONFIG_PATH=$(kiln --pkgconfigdir)).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn output_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

fn from_kiln_cli() -> Option<PathBuf> {
    // The first word is the library's path (`kiln --libs` prints linker arguments).
    let libs = output_of("kiln", &["--libs"])?;
    let first = libs.split_whitespace().next()?;
    Path::new(first).parent().map(Path::to_path_buf)
}

fn from_pkg_config() -> Option<PathBuf> {
    let dir = output_of("pkg-config", &["--variable=libdir", "kiln"])?;
    Some(PathBuf::from(dir.trim()))
}

fn main() {
    println!("cargo:rerun-if-env-changed=KILN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PATH");
    let (dir, how) = match env::var_os("KILN_LIB_DIR") {
        Some(d) => (PathBuf::from(d), "KILN_LIB_DIR"),
        None => match from_kiln_cli() {
            Some(d) => (d, "kiln --libs"),
            None => match from_pkg_config() {
                Some(d) => (d, "pkg-config"),
                None => panic!(
                    "kiln: libkiln.so.0 not found: install the kiln wheel and put its `kiln` command on PATH, \
                     or set PKG_CONFIG_PATH=$(kiln --pkgconfigdir) or KILN_LIB_DIR"
                ),
            },
        },
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    if !dir.join("libkiln.so.0").is_file() {
        panic!("kiln: {} (from {how}) holds no libkiln.so.0", dir.display());
    }
    println!("cargo:warning=kiln: linking {}/libkiln.so.0 (found by {how})", dir.display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    // The wheel ships the versioned file only (no libkiln.so link): name it verbatim.
    println!("cargo:rustc-link-lib=dylib:+verbatim=libkiln.so.0");
    if env::var_os("CARGO_FEATURE_LLM").is_some() {
        println!("cargo:rustc-link-lib=dylib:+verbatim=libkiln_llm.so.0");
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}
