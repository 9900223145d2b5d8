//! Path-prefix matching: segment-bounded, ASCII case-insensitive, longest
//! prefix wins.

use std::boxed::Box;
use std::string::String;
use std::vec::Vec;

/// A normalised path prefix: starts with `/`, no trailing `/` (except the
/// root prefix `/`), lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PathPrefix(String);

/// Why a path prefix was refused: each is a prefix the router could never
/// match as written (it compares the request's path, as the client sent
/// it, segment by segment, ignoring ASCII case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrefixError {
    /// It does not start with `/`.
    NoLeadingSlash,
    /// It holds `*`, `{` or `}`: a wildcard or a route parameter, which a
    /// prefix does not have (it already covers every path below it).
    Wildcard,
    /// It holds `?` or `#`: a query or a fragment (or a `?` wildcard); the
    /// router compares the path alone.
    QueryOrFragment,
    /// It holds a character no request path holds as it is: whitespace, a
    /// control character, `<`, `>`, `` ` `` or a non-ASCII character
    /// (clients percent-encode them).
    NotAPath,
    /// A `%` that is not followed by two hex digits, or that encodes a
    /// letter, a digit, `-`, `.`, `_` or `~`: clients send those as
    /// themselves (RFC 3986, 2.3), and the router does not decode.
    PercentEncoded,
    /// A `.` or `..` segment: clients resolve them before sending.
    DotSegment,
    /// An empty segment (`//`), which no route of the application has.
    EmptySegment,
}

impl PrefixError {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NoLeadingSlash => "must start with '/' (\"/api/login\")",
            Self::Wildcard => {
                "must be a literal path: '*', '{' and '}' are no wildcards or parameters here, and a prefix already covers every path below it (\"/api/login\" matches \"/api/login/x\")"
            }
            Self::QueryOrFragment => {
                "must be a path alone: '?' starts a query and '#' a fragment (neither is a wildcard), and the router compares only the path (\"/api/login\")"
            }
            Self::NotAPath => {
                "must be a path as clients send it: visible ASCII without spaces, '<', '>' or '`' (percent-encode other characters, as clients do: \"/caf%C3%A9\")"
            }
            Self::PercentEncoded => {
                "must write letters, digits, '-', '.', '_' and '~' as themselves, as clients send them (\"/api/login\", not \"/api/log%69n\"); '%' must start a two-hex-digit escape (\"%20\", \"%C3%A9\")"
            }
            Self::DotSegment => {
                "must not hold a '.' or '..' segment: clients resolve them before sending; write the path they lead to (\"/api/login\", not \"/api/../api/login\")"
            }
            Self::EmptySegment => {
                "must not hold an empty segment: one '/' between segments (\"/api/login\", not \"//api/login\"); a single trailing '/' is allowed"
            }
        }
    }
}

/// A byte a request path holds as it is (the `http` crate's path
/// characters, which the server accepts in a request line), other than the
/// ones [`PathPrefix::parse`] refuses for their own reason.
fn path_byte(b: u8) -> bool {
    matches!(b,
        b'!' | b'"' | b'$'..=b';' | b'=' | b'@'..=b'_' | b'a'..=b'z' | b'|' | b'~')
}

/// A byte clients send as itself, never percent-encoded (RFC 3986's
/// unreserved characters).
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

impl PathPrefix {
    /// Checks and normalises `raw`: lower case, a trailing slash removed.
    /// Refused (see [`PrefixError`]) unless the router can match it as
    /// written.
    pub(crate) fn parse(raw: &str) -> Result<Self, PrefixError> {
        if !raw.starts_with('/') {
            return Err(PrefixError::NoLeadingSlash);
        }
        let bytes = raw.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'*' | b'{' | b'}' => return Err(PrefixError::Wildcard),
                b'?' | b'#' => return Err(PrefixError::QueryOrFragment),
                b'%' => {
                    let hex = |j: usize| {
                        bytes
                            .get(j)
                            .and_then(|&h| char::from(h).to_digit(16))
                            .and_then(|d| u8::try_from(d).ok())
                    };
                    match (hex(i + 1), hex(i + 2)) {
                        (Some(hi), Some(lo)) if !unreserved(hi * 16 + lo) => {}
                        _ => return Err(PrefixError::PercentEncoded),
                    }
                }
                b if path_byte(b) => {}
                _ => return Err(PrefixError::NotAPath),
            }
        }
        if raw != "/" {
            let body = raw.strip_suffix('/').unwrap_or(raw);
            for segment in body[1..].split('/') {
                match segment {
                    "" => return Err(PrefixError::EmptySegment),
                    "." | ".." => return Err(PrefixError::DotSegment),
                    _ => {}
                }
            }
        }
        let trimmed = raw.strip_suffix('/').filter(|t| !t.is_empty());
        let mut s = String::from(trimmed.unwrap_or(raw));
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
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// True when `path` is this prefix or lies under it, segment-bounded and
    /// ignoring ASCII case: `/test` matches `/test`, `/Test/x`, `/test/`,
    /// not `/testxxx` or `/contest`. (The layer matches through a
    /// [`PrefixTree`]; its tests and the routing fuzz target compare against
    /// this; config checks use it through [`PathPrefix::covers`].)
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

/// Path prefixes in a tree of path segments: a lookup walks the path's
/// segments once, with a binary search among each node's children, so its
/// cost grows with the path's depth, not with the number of prefixes.
///
/// It answers exactly as testing every [`PathPrefix::matches`] and keeping
/// the longest match: a node at depth `d` is the prefix made of the first
/// `d` segments, so the deepest node reached that holds an accepted value
/// is the longest matching prefix.
#[derive(Debug, Clone)]
pub(crate) struct PrefixTree<T> {
    nodes: Vec<Node<T>>,
}

#[derive(Debug, Clone)]
struct Node<T> {
    /// (lower-case segment, node index), sorted by segment.
    children: Vec<(Box<[u8]>, usize)>,
    /// The values of the prefix ending here, in registration order.
    values: Vec<T>,
}

impl<T> Node<T> {
    fn new() -> Self {
        Self {
            children: Vec::new(),
            values: Vec::new(),
        }
    }
}

/// Compares `segment` ASCII-lower-cased with `key` (already lower case).
fn cmp_lower(key: &[u8], segment: &[u8]) -> core::cmp::Ordering {
    let n = key.len().min(segment.len());
    for i in 0..n {
        let o = key[i].cmp(&segment[i].to_ascii_lowercase());
        if o.is_ne() {
            return o;
        }
    }
    key.len().cmp(&segment.len())
}

impl<T> Default for PrefixTree<T> {
    fn default() -> Self {
        Self {
            nodes: std::vec![Node::new()],
        }
    }
}

impl<T> PrefixTree<T> {
    /// The segments of a prefix or path after its leading `/` (`None` for
    /// the root prefix `/`).
    fn segments(path: &str) -> Option<core::str::Split<'_, char>> {
        let rest = path.strip_prefix('/')?;
        Some(rest.split('/'))
    }

    /// Adds `value` under `prefix` (after the values already there).
    pub(crate) fn insert(&mut self, prefix: &PathPrefix, value: T) {
        let mut node = 0;
        if prefix.0 != "/" {
            for seg in Self::segments(&prefix.0).into_iter().flatten() {
                let seg = seg.as_bytes();
                node = match self.nodes[node]
                    .children
                    .binary_search_by(|(k, _)| cmp_lower(k, seg))
                {
                    Ok(i) => self.nodes[node].children[i].1,
                    Err(i) => {
                        let child = self.nodes.len();
                        self.nodes.push(Node::new());
                        self.nodes[node]
                            .children
                            .insert(i, (seg.to_ascii_lowercase().into(), child));
                        child
                    }
                };
            }
        }
        self.nodes[node].values.push(value);
    }

    /// The first value `accept`s, of the longest prefix that matches `path`
    /// and holds one (a shorter prefix's values are tried only when no
    /// longer matching prefix has an accepted value).
    #[inline]
    pub(crate) fn longest(&self, path: &str, accept: impl Fn(&T) -> bool) -> Option<&T> {
        let mut best = self.nodes[0].values.iter().find(|v| accept(v));
        if self.nodes[0].children.is_empty() {
            // no prefix below the root: nothing to split the path for
            return best;
        }
        let Some(segments) = Self::segments(path) else {
            return best;
        };
        let mut node = &self.nodes[0];
        for seg in segments {
            if node.children.is_empty() {
                break;
            }
            let seg = seg.as_bytes();
            match node.children.binary_search_by(|(k, _)| cmp_lower(k, seg)) {
                Ok(i) => node = &self.nodes[node.children[i].1],
                Err(_) => break,
            }
            if let Some(v) = node.values.iter().find(|v| accept(v)) {
                best = Some(v);
            }
        }
        best
    }

    /// True if some prefix matches `path`.
    #[inline]
    pub(crate) fn matches(&self, path: &str) -> bool {
        !self.is_empty() && self.longest(path, |_| true).is_some()
    }

    /// True if the tree holds no prefix.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].values.is_empty()
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
        use PrefixError::*;
        for (bad, why) in [
            ("api", NoLeadingSlash),
            ("", NoLeadingSlash),
            ("*", NoLeadingSlash),
            ("/api/login ", NotAPath),
            ("/a b", NotAPath),
            ("/caf\u{e9}", NotAPath),
            ("/a\tb", NotAPath),
            ("/a<b>", NotAPath),
            ("/a`b", NotAPath),
            ("/a\u{7f}", NotAPath),
            ("/a?x", QueryOrFragment),
            ("/api/login?", QueryOrFragment),
            ("/a#x", QueryOrFragment),
            ("/api/login*", Wildcard),
            ("/api/*/x", Wildcard),
            ("/users/{id}", Wildcard),
            ("/api/log%69n", PercentEncoded),
            ("/api/%2e%2e/x", PercentEncoded),
            ("/a%7E", PercentEncoded),
            ("/a%", PercentEncoded),
            ("/a%2", PercentEncoded),
            ("/a%zz", PercentEncoded),
            ("/api/../api/login", DotSegment),
            ("/api/./login", DotSegment),
            ("/api/..", DotSegment),
            ("/api/.", DotSegment),
            ("/api/../", DotSegment),
            ("/.", DotSegment),
            ("//api/login", EmptySegment),
            ("/api//login", EmptySegment),
            ("/api//", EmptySegment),
            ("//", EmptySegment),
        ] {
            assert_eq!(PathPrefix::parse(bad), Err(why), "{bad:?}");
        }
        // what a client sends as it is: reserved characters, escapes of
        // the others, dots inside a segment, one trailing slash
        for (good, normal) in [
            ("/caf%C3%A9", "/caf%c3%a9"),
            ("/a%20b", "/a%20b"),
            ("/files/a%2Fb", "/files/a%2fb"),
            ("/a%25", "/a%25"),
            ("/v1/x:batchGet", "/v1/x:batchget"),
            ("/.well-known/acme", "/.well-known/acme"),
            ("/a..b/...", "/a..b/..."),
            ("/~user/$x;y=1,z@!+&'()[]|\"", "/~user/$x;y=1,z@!+&'()[]|\""),
            ("/api/", "/api"),
        ] {
            assert_eq!(
                PathPrefix::parse(good).map(|p| p.0),
                Ok(normal.into()),
                "{good:?}"
            );
        }
        let api = PathPrefix::parse("/API/").unwrap();
        assert_eq!(api, PathPrefix::parse("/api").unwrap());
        assert!(api.covers(&PathPrefix::parse("/api/login").unwrap()));
        assert!(!api.covers(&PathPrefix::parse("/apix").unwrap()));
        assert!(root.covers(&api));
    }

    /// The tree answers like the linear scan it replaces: every matching
    /// prefix tested, the longest kept, registration order among equals.
    #[test]
    fn tree_matches_the_linear_scan() {
        use std::{format, vec};
        let raw = [
            "/",
            "/api",
            "/API/v1",
            "/api/v1/",
            "/api/v1/users",
            "/a/b",
            "/apix",
            "/api/v2",
            "/health",
            "/Health/live",
            "/x/y/z",
            "/api",
        ];
        let prefixes: Vec<PathPrefix> = raw.iter().map(|r| PathPrefix::parse(r).unwrap()).collect();
        // registered as the layer does: longest first, stable
        let mut order: Vec<usize> = (0..prefixes.len()).collect();
        order.sort_by_key(|&i| core::cmp::Reverse(prefixes[i].len()));
        let mut tree = PrefixTree::default();
        for &i in &order {
            tree.insert(&prefixes[i], i);
        }
        let segs = [
            "", "api", "API", "v1", "V1", "v2", "users", "apix", "a", "b", "health", "live", "x",
            "y", "z", "q",
        ];
        let mut paths = vec![String::new(), "*".into(), "api".into()];
        // every path of up to 4 segments drawn from `segs`, with and without a trailing slash
        let mut frontier = vec![String::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for p in &frontier {
                for s in segs {
                    let q = format!("{p}/{s}");
                    paths.push(q.clone());
                    paths.push(format!("{q}/"));
                    next.push(q);
                }
            }
            frontier = next;
        }
        // odd-numbered policies accept only some requests (a method filter)
        for filter in [false, true] {
            let accept = |i: &usize| !filter || i.is_multiple_of(2);
            for path in &paths {
                let linear = order
                    .iter()
                    .find(|&&i| prefixes[i].matches(path) && accept(&i))
                    .copied();
                assert_eq!(tree.longest(path, accept).copied(), linear, "{path:?}");
                assert_eq!(
                    tree.matches(path),
                    prefixes.iter().any(|p| p.matches(path)),
                    "{path:?}"
                );
            }
        }
        assert!(PrefixTree::<()>::default().is_empty());
        assert!(!PrefixTree::<()>::default().matches("/"));
    }
}
