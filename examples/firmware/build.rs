//! Puts `memory.x` where cortex-m-rt's `link.x` finds it, and tells the
//! firmware which target it was built for (it prints it). thumbv6m images
//! run on QEMU's `microbit` (an nRF51822: a Cortex-M0 with 16 KiB of RAM),
//! the others on machines with 64 KiB or more.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = env::var("TARGET").unwrap_or_default();
    let memory: &[u8] = if target.starts_with("thumbv6m") {
        include_bytes!("memory-microbit.x")
    } else {
        include_bytes!("memory-lm3s6965-mps2.x")
    };
    fs::write(out.join("memory.x"), memory).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-env=FIRMWARE_TARGET={target}");
    println!("cargo:rerun-if-changed=memory-lm3s6965-mps2.x");
    println!("cargo:rerun-if-changed=memory-microbit.x");
    println!("cargo:rerun-if-changed=build.rs");
}
