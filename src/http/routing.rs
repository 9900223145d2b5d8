//! Path-prefix matching: segment-bounded, ASCII case-insensitive, longest
//! prefix wins.

use std::string::String;

/// A normalised path prefix: starts with `/`, no trailing `/` (except the
/// root prefix `/`), lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PathPrefix(String);

/// Why a path prefix was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrefixError {
    /// It does not start with `/`.
    NoLeadingSlash,
}

impl PathPrefix {
    /// Normalises `raw`: lower case, trailing slashes removed.
    pub(crate) fn parse(raw: &str) -> Result<Self, PrefixError> {
        if !raw.starts_with('/') {
            return Err(PrefixError::NoLeadingSlash);
        }
        let trimmed = raw.trim_end_matches('/');
        let mut s = String::from(if trimmed.is_empty() { "/" } else { trimmed });
        s.make_ascii_lowercase();
        Ok(Self(s))
    }

    /// The normalised text.
    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Length used to rank matches (longer = more specific).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// True when `path` is this prefix or lies under it, segment-bounded and
    /// ignoring ASCII case: `/test` matches `/test`, `/Test/x`, `/test/`,
    /// not `/testxxx` or `/contest`.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let p = self.0.as_bytes();
        if p == b"/" {
            return true;
        }
        let path = path.as_bytes();
        if path.len() < p.len() || !path[..p.len()].eq_ignore_ascii_case(p) {
            return false;
        }
        matches!(path.get(p.len()), None | Some(b'/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_bounded_and_case_insensitive() {
        let p = PathPrefix::parse("/test/").unwrap();
        assert_eq!(p.as_str(), "/test");
        for yes in ["/test", "/test/", "/test/limiter", "/Test/x", "/TEST"] {
            assert!(p.matches(yes), "{yes}");
        }
        for no in ["/testxxx", "/contest", "/", "/tes", ""] {
            assert!(!p.matches(no), "{no}");
        }
        let root = PathPrefix::parse("/").unwrap();
        assert!(root.matches("/anything") && root.matches("/"));
        assert_eq!(PathPrefix::parse("api"), Err(PrefixError::NoLeadingSlash));
    }
}
