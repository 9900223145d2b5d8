//! A real `redis-server` for the tests: spawned on 127.0.0.1 with an
//! ephemeral port, no persistence, killed on drop.
//!
//! A server kept in a `static` is never dropped, and one whose test panics
//! may not be either: each server therefore runs beside a tiny shell
//! watchdog that kills it (SIGKILL, which also ends a frozen one) within a
//! fraction of a second of the test process disappearing. No server
//! outlives the test binary that started it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Spawned>,
    port: u16,
}

/// A `redis-server` process and the watchdog that ends it with the test
/// process.
struct Spawned {
    server: Child,
    watchdog: Child,
}

impl Spawned {
    /// Kills the server (as a crash would) and its watchdog, and reaps both.
    fn kill(mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

/// Starts the watchdog of `server`: a shell that polls every 0.2 s whether
/// this test process and the server still exist, and SIGKILLs the server
/// once the test process is gone. It exits by itself when the server does.
fn watchdog(server: u32) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(
            r#"while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 0.2; done
kill -9 "$2" 2>/dev/null
exit 0"#,
        )
        .arg("tollgate-redis-watchdog")
        .arg(std::process::id().to_string())
        .arg(server.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the redis-server watchdog (sh)")
}

impl RedisServer {
    /// Starts a fresh server. Panics with an explanation if `redis-server`
    /// is not installed: these tests must not pass silently without one.
    pub fn start() -> Self {
        for _ in 0..10 {
            let port = free_port();
            if let Some(child) = spawn(port, &[]) {
                return Self {
                    child: Some(child),
                    port,
                };
            }
        }
        panic!("could not start redis-server on any ephemeral port");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server running").server.id()
    }

    /// Kills the server (as a crash would).
    pub fn stop(&mut self) {
        if let Some(spawned) = self.child.take() {
            spawned.kill();
        }
    }

    /// Starts the server again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = spawn(self.port, &[]) {
                self.child = Some(child);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not restart redis-server on port {}",
                self.port
            );
            // retries until the old server's port is free, under a deadline
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the server process (SIGSTOP): connections stay open and
    /// nothing answers, the worst case for a caller without a timeout.
    pub fn freeze(&self) {
        signal(self.pid(), "-STOP");
    }

    /// Resumes a frozen server (SIGCONT).
    pub fn thaw(&self) {
        signal(self.pid(), "-CONT");
    }

    /// A synchronous admin connection.
    pub fn admin(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("admin connection to the test redis-server")
    }

    /// Calls per command name, from `INFO commandstats`.
    pub fn command_calls(&self) -> std::collections::BTreeMap<String, u64> {
        self.command_stat("calls=")
    }

    /// Server CPU microseconds per command name, from `INFO commandstats`.
    pub fn command_usec(&self) -> std::collections::BTreeMap<String, u64> {
        self.command_stat("usec=")
    }

    fn command_stat(&self, field: &str) -> std::collections::BTreeMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.admin())
            .expect("INFO commandstats");
        info.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(field))?
                    .parse()
                    .ok()?;
                Some((name.to_string(), calls))
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL ends a frozen (SIGSTOPped) server too
        self.stop();
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// Spawns `redis-server` on `port` with its watchdog and waits for PING;
/// `None` if it exited (e.g. the port was taken meanwhile).
fn spawn(port: u16, extra: &[&str]) -> Option<Spawned> {
    let server = match Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(extra)
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "redis-server is not on PATH: these tests need a real Redis \
             and do not skip; scripts/test.sh installs it (Debian/Ubuntu) \
             and runs every test"
        ),
        Err(e) => panic!("could not spawn redis-server: {e}"),
    };
    let mut child = Spawned {
        watchdog: watchdog(server.id()),
        server,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.server.try_wait() {
            child.kill(); // reaps the watchdog
            return None;
        }
        if ping(port) {
            return Some(child);
        }
        // polls a condition (PING answered) under a 10 s deadline
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill();
    None
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// A 3-shard Redis Cluster of real `redis-server`s (no replicas), slots
/// split evenly, each node on an ephemeral port with its own bus port.
pub struct RedisCluster {
    /// (process and watchdog, port, cluster bus port)
    nodes: Vec<(Spawned, u16, u16)>,
    dir: std::path::PathBuf,
}

impl RedisCluster {
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tollgate-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("cluster temp dir");
        let mut nodes = Vec::new();
        while nodes.len() < 3 {
            let (port, bus) = (free_port(), free_port());
            let conf = format!("nodes-{port}.conf");
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &bus.to_string(),
                "--cluster-config-file",
                &conf,
                "--dir",
                dir.to_str().expect("utf-8 temp dir"),
            ];
            if let Some(child) = spawn(port, &args) {
                nodes.push((child, port, bus));
            }
        }
        let cluster = Self { nodes, dir };
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (i, &(lo, hi)) in ranges.iter().enumerate() {
            let () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(lo)
                .arg(hi)
                .query(&mut cluster.admin(i))
                .expect("CLUSTER ADDSLOTSRANGE");
        }
        for i in 1..3 {
            let () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(cluster.nodes[i].1)
                .arg(cluster.nodes[i].2) // the bus port is not port + 10000
                .query(&mut cluster.admin(0))
                .expect("CLUSTER MEET");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = (0..3).all(|i| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut cluster.admin(i))
                    .unwrap_or_default();
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
            });
            if ready {
                return cluster;
            }
            assert!(
                Instant::now() < deadline,
                "cluster did not converge in 20 s"
            );
            // polls a condition (the cluster converged) under a deadline
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|(_, port, _)| format!("redis://127.0.0.1:{port}/"))
            .collect()
    }

    /// A plain connection to node `i` (not cluster-aware).
    pub fn admin(&self, i: usize) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.nodes[i].1))
            .and_then(|c| c.get_connection())
            .expect("admin connection to a cluster node")
    }

    /// Keys stored on each node.
    pub fn key_counts(&self) -> Vec<u64> {
        (0..self.nodes.len())
            .map(|i| {
                redis::cmd("DBSIZE")
                    .query(&mut self.admin(i))
                    .expect("DBSIZE")
            })
            .collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (node, _, _) in self.nodes.drain(..) {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
