//! Telling a rules file that is still being written from one that is
//! done: [`SettledText`].

use std::string::String;

/// Decides when a polled rules file has settled: a reloader reads the
/// file every interval and hands each read to [`observe`](Self::observe),
/// which returns the text once two reads in a row were identical and it
/// differs from the text returned last (or loaded first). A file caught
/// halfway through being written reads differently the next time, so it
/// is not returned; the reloader then parses it and gives it to
/// [`RateLimitLayer::reload`](crate::RateLimitLayer::reload), which
/// changes nothing if the text is refused.
///
/// This is a heuristic for files edited in place. The safe way to replace
/// a rules file is to write the new one beside it and rename it over the
/// old one (`mv rules.toml.new rules.toml`, which most editors and
/// configuration tools do): a reader then sees the old file or the new
/// one, never a part. A writer that stops halfway for longer than the
/// interval, or dies there, leaves a part that settles; if that part
/// still parses (a file cut after a whole rule is a valid, shorter file)
/// it is applied. A part with no limit at all is refused (see
/// [`allow_no_limits`](super#a-file-must-set-a-limit)).
///
/// ```
/// use tollgate::http::config::SettledText;
///
/// let full = "[global]\nrate = 100\n";
/// let mut file = SettledText::new(full);
/// // a writer replacing the file in place, caught halfway, then done
/// assert_eq!(file.observe("[glo".into()), None);
/// assert_eq!(file.observe("[global]\nrate = 50\n".into()), None);
/// // the same text a second time: settled, and new
/// assert_eq!(file.observe("[global]\nrate = 50\n".into()), Some("[global]\nrate = 50\n"));
/// // and only once
/// assert_eq!(file.observe("[global]\nrate = 50\n".into()), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SettledText {
    /// The previous read.
    previous: Option<String>,
    /// The text returned last, or the one loaded first.
    current: String,
}

impl SettledText {
    /// Starts from the text the layer was built from.
    pub fn new(loaded: impl Into<String>) -> Self {
        let current = loaded.into();
        Self {
            previous: Some(current.clone()),
            current,
        }
    }

    /// Takes what the file holds now; returns it when the previous read
    /// held the same and it is not the text returned last (or loaded
    /// first): the moment to parse and reload it. A text refused when
    /// parsed is not returned again until the file changes.
    pub fn observe(&mut self, text: String) -> Option<&str> {
        let settled = self.previous.as_ref() == Some(&text) && text != self.current;
        if settled {
            self.current = text;
            self.previous = Some(self.current.clone());
            return Some(&self.current);
        }
        self.previous = Some(text);
        None
    }
}
