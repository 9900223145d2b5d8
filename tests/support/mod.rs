//! A real `redis-server` for the tests: spawned on 127.0.0.1 with an
//! ephemeral port, no persistence, killed on drop.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

impl RedisServer {
    /// Starts a fresh server. Panics with an explanation if `redis-server`
    /// is not installed: these tests must not pass silently without one.
    pub fn start() -> Self {
        for _ in 0..10 {
            let port = free_port();
            if let Some(child) = spawn(port) {
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
        self.child.as_ref().expect("server running").id()
    }

    /// Kills the server (as a crash would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = spawn(self.port) {
                self.child = Some(child);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not restart redis-server on port {}",
                self.port
            );
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
                    .find_map(|kv| kv.strip_prefix("calls="))?
                    .parse()
                    .ok()?;
                Some((name.to_string(), calls))
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), "-CONT"); // a frozen server cannot die
        }
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

/// Spawns `redis-server` on `port` and waits for PING; `None` if it exited
/// (e.g. the port was taken meanwhile).
fn spawn(port: u16) -> Option<Child> {
    let mut child = match Command::new("redis-server")
        .args(["--port", &port.to_string()])
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
             (Debian/Ubuntu: apt-get install -y redis-server); they do not skip"
        ),
        Err(e) => panic!("could not spawn redis-server: {e}"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if ping(port) {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
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
