//! The error of a layer that cannot be built.

use core::fmt;
use std::string::{String, ToString};
use std::sync::Arc;

/// A layer that cannot be built, naming where the problem is
/// (`rules[2].burst: must be at least 1`).
///
/// An error made from another one keeps it as its
/// [`source`](core::error::Error::source): the TOML or JSON parser's error
/// under a [`ConfigErrorKind::Syntax`], the core's
/// [`tollgate_core::ConfigError`] under a quota, window, table size or
/// clock resolution it refuses, the Redis store's
/// [`redis::ConfigError`](tollgate_redis::ConfigError) under a
/// `backend = "redis"` rule it refuses. The `Display` text stays one
/// message of its own (a `Syntax` error's is the parser's text, which a
/// report printing the whole chain shows twice). Two errors are equal when
/// their location and kind are; the source is not compared.
///
/// ```
/// use std::error::Error;
/// use tollgate::http::LayerConfig;
///
/// let err = LayerConfig::from_json(r#"{"rules": [}"#).unwrap_err();
/// assert_eq!(err.to_string(), "expected value at line 1 column 12");
/// assert!(err.source().is_some_and(|s| s.is::<serde_json::Error>()));
/// ```
#[derive(Debug, Clone)]
pub struct ConfigError {
    location: String,
    kind: ConfigErrorKind,
    /// The error this one was made from.
    source: Option<Arc<dyn core::error::Error + Send + Sync>>,
}

impl PartialEq for ConfigError {
    fn eq(&self, other: &Self) -> bool {
        self.location == other.location && self.kind == other.kind
    }
}

impl Eq for ConfigError {}

/// What is wrong in a [`ConfigError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A value outside what the field accepts; the text says what it must be.
    Invalid(&'static str),
    /// Two policies with the same name.
    DuplicateName,
    /// A document that does not parse (TOML or JSON syntax, unknown field,
    /// wrong type).
    Syntax(String),
    /// A setting that contradicts another one or could never take effect
    /// (two rules for the same path and methods, a rule under an exempt
    /// path); the text names the other setting.
    Conflict(String),
}

impl ConfigError {
    pub(crate) fn invalid(location: impl ToString, what: &'static str) -> Self {
        Self {
            location: location.to_string(),
            kind: ConfigErrorKind::Invalid(what),
            source: None,
        }
    }

    pub(crate) fn new(location: impl ToString, kind: ConfigErrorKind) -> Self {
        Self {
            location: location.to_string(),
            kind,
            source: None,
        }
    }

    /// This error, made from `source` (reported by `source()`).
    pub(crate) fn caused_by(
        mut self,
        source: impl core::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Where: `rules[2].burst`, `global.rate`, `policy "api".name`, ….
    pub fn location(&self) -> &str {
        &self.location
    }

    /// What.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.kind
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ConfigErrorKind::Invalid(what) => write!(f, "{}: {what}", self.location),
            ConfigErrorKind::DuplicateName => {
                write!(f, "{}: another rule has the same name", self.location)
            }
            ConfigErrorKind::Conflict(msg) => write!(f, "{}: {msg}", self.location),
            ConfigErrorKind::Syntax(msg) if self.location.is_empty() => f.write_str(msg),
            ConfigErrorKind::Syntax(msg) => write!(f, "{}: {msg}", self.location),
        }
    }
}

impl core::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match &self.source {
            Some(source) => Some(&**source),
            None => None,
        }
    }
}
