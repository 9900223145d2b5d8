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
    /// It holds a character a request path cannot hold: whitespace, a
    /// control character, `?`, `#`, or a non-ASCII character (paths arrive
    /// percent-encoded). Such a prefix would never match.
    NotAPath,
}

impl PrefixError {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NoLeadingSlash => "must start with '/'",
            Self::NotAPath => "must be a path: visible ASCII without spaces, '?' or '#' (percent-encode other characters), or it would never match",
        }
    }
}

impl PathPrefix {
    /// Normalises `raw`: lower case, trailing slashes removed.
    pub(crate) fn parse(raw: &str) -> Result<Self, PrefixError> {
        if !raw.starts_with('/') {
            return Err(PrefixError::NoLeadingSlash);
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
        {
            return Err(PrefixError::NotAPath);
        }
        let trimmed = raw.trim_end_matches('/');
        let mut s = String::from(if trimmed.is_empty() { "/" } else { trimmed });
        s.make_ascii_lowercase();
        Ok(Self(s))
    }

    /// True when every path `other` matches, this prefix matches too.
    pub(crate) fn covers(&self, other: &Self) -> bool {
        self.matches(&other.0)
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
        for bad in ["/api/login ", "/a b", "/a?x", "/a#x", "/caf\u{e9}", "/a\tb"] {
            assert_eq!(
                PathPrefix::parse(bad),
                Err(PrefixError::NotAPath),
                "{bad:?}"
            );
        }
        let api = PathPrefix::parse("/API/").unwrap();
        assert_eq!(api, PathPrefix::parse("/api").unwrap());
        assert!(api.covers(&PathPrefix::parse("/api/login").unwrap()));
        assert!(!api.covers(&PathPrefix::parse("/apix").unwrap()));
        assert!(root.covers(&api));
    }
}
