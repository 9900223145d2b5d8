//! Host tests of tollgate's embassy layer (`tests/embassy_wait.rs`), run on
//! embassy-time's mock driver. This crate has no code of its own.
#![no_std]
