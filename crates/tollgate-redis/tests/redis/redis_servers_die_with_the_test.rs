//! The Redis test harness leaks no `redis-server`: a server kept in a
//! `static` (never dropped), or left behind by a test process that exits
//! without unwinding, is killed by its watchdog once that process is gone.

use crate::support;

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use support::RedisServer;

/// Set in the child process: start a server in a static, print its pid and
/// exit at once, dropping nothing.
const CHILD: &str = "TOLLGATE_TEST_LEAK_A_REDIS_SERVER";

fn alive(pid: u32) -> bool {
    // a zombie is dead for this purpose: it holds no port and no memory
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        })
        .unwrap_or(false)
}

#[test]
fn a_server_in_a_static_dies_with_its_test_process() {
    if std::env::var_os(CHILD).is_some() {
        static SERVER: OnceLock<RedisServer> = OnceLock::new();
        let server = SERVER.get_or_init(RedisServer::start);
        println!("redis-server pid {}", server.pid());
        // never dropped: statics are not, and `exit` runs no destructors
        std::process::exit(0);
    }
    // this test's name in its binary: the module path less the crate's name
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::a_server_in_a_static_dies_with_its_test_process");
    let out = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--exact", name.trim_start_matches("::"), "--nocapture"])
        .env(CHILD, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the child test process");
    assert!(out.status.success(), "child failed: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("redis-server pid "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in the child's output: {stdout}"));
    // the watchdog polls every 0.2 s; give it ample time on a loaded machine
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "redis-server {pid} outlived its test process by 30 s"
        );
        std::thread::sleep(Duration::from_millis(20)); // polls a condition
    }
}

#[test]
fn a_dropped_server_and_its_watchdog_are_gone_at_once() {
    let server = RedisServer::start();
    let pid = server.pid();
    assert!(alive(pid));
    drop(server);
    assert!(!alive(pid), "killed and reaped by drop");
}

#[test]
fn a_frozen_server_is_killed_by_drop() {
    let server = RedisServer::start();
    let pid = server.pid();
    server.freeze();
    drop(server);
    assert!(!alive(pid), "SIGKILL ends a stopped process");
}
