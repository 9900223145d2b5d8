//! What the code under test logs: a `tracing` subscriber for the calling
//! thread that keeps every line (INFO and above) in memory. Tests that read
//! it run on a current-thread runtime, so the server or store under test
//! logs on that thread.

use std::sync::{Arc, Mutex, OnceLock};

/// Everything written by the subscriber of [`capture`].
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    /// The lines written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines written so far that contain `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Logs INFO and above of this thread into the returned [`Log`] until the
/// guard drops.
pub fn capture() -> (Log, tracing::subscriber::DefaultGuard) {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // tracing caches each call site's interest when the site is first
    // reached, asking every registered subscriber, except while only one
    // is registered: then it asks the reaching thread's own, so a site a
    // test without a subscriber reaches first would be "never" for this
    // one too. A second subscriber, registered for good and never used,
    // keeps every site asking them all.
    static ALWAYS_TWO: OnceLock<tracing::Dispatch> = OnceLock::new();
    ALWAYS_TWO.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    let guard = tracing::subscriber::set_default(subscriber);
    (log, guard)
}
