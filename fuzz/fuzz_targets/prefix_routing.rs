//! Prefix routing against a reference model: a prefix is refused unless the
//! router can match it as written (a visible-ASCII path starting with `/`,
//! without `*`, `{`, `}`, `?`, `#`, `<`, `>` or `` ` ``, whose `%` escapes
//! are two hex digits of a byte clients do not send as itself, with no
//! `.`, `..` or empty segment but for one trailing `/`); a normalised prefix matches a
//! path exactly when the path, ASCII-lower-cased, is it or continues it
//! with `/`; the layer routes a request to the longest matching prefix of
//! a policy whose methods allow it (ties: the first registered), and
//! refuses to build two policies for the same path and methods.
#![no_main]

use arbitrary::Arbitrary;
use http::Method;
use libfuzzer_sys::fuzz_target;
use tollgate_http::fuzzing::{self, Routes};

#[derive(Debug, Arbitrary)]
struct Input {
    policies: Vec<(Vec<String>, Option<Vec<u8>>)>,
    requests: Vec<(u8, String)>,
}

const METHODS: [Method; 4] = [Method::GET, Method::POST, Method::PUT, Method::DELETE];

fn normalise(raw: &str) -> Option<String> {
    let rest = raw.strip_prefix('/')?;
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                let byte = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    return None;
                }
                i += 3;
            }
            b if b.is_ascii_graphic() && !b"*{}?#<>`".contains(&b) => i += 1,
            _ => return None,
        }
    }
    if !rest.is_empty() {
        let body = rest.strip_suffix('/').unwrap_or(rest);
        if body
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return None;
        }
    }
    let t = raw.strip_suffix('/').unwrap_or(raw);
    Some(if t.is_empty() {
        "/".into()
    } else {
        t.to_ascii_lowercase()
    })
}

fn model_matches(prefix: &str, path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    let lower = path.to_ascii_lowercase();
    lower == prefix
        || lower
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

fuzz_target!(|input: Input| {
    for (prefixes, _) in input.policies.iter().take(6) {
        for p in prefixes.iter().take(3) {
            for (_, path) in input.requests.iter().take(6) {
                let got = fuzzing::prefix_matches(p, path);
                let want = normalise(p).map(|n| model_matches(&n, path));
                assert_eq!(got, want, "prefix {p:?} path {path:?}");
            }
        }
    }
    let policies: Vec<(Vec<String>, Option<Vec<Method>>)> = input
        .policies
        .iter()
        .take(6)
        .map(|(prefixes, methods)| {
            let methods = methods.as_ref().map(|m| {
                let mut list: Vec<Method> = Vec::new();
                for b in m.iter().take(4) {
                    let method = METHODS[usize::from(*b) % METHODS.len()].clone();
                    if !list.contains(&method) {
                        list.push(method);
                    }
                }
                list
            });
            (prefixes.iter().take(3).cloned().collect(), methods)
        })
        .collect();
    let routes = match Routes::new(&policies) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.is_empty());
            return;
        }
    };
    // the model: (normalised prefix, policy, methods) for every prefix
    let mut table = Vec::new();
    for (i, (prefixes, methods)) in policies.iter().enumerate() {
        for p in prefixes {
            let n = normalise(p).expect("a built layer has valid prefixes");
            table.push((n, i, methods.clone()));
        }
    }
    for (pair, (a, i, ma)) in table.iter().enumerate() {
        for (b, j, mb) in &table[pair + 1..] {
            let overlap = match (ma, mb) {
                (Some(x), Some(y)) => x.iter().any(|m| y.contains(m)),
                _ => true,
            };
            let _ = (i, j);
            assert!(a != b || !overlap, "built with two routes for {a:?}");
        }
    }
    for (m, path) in input.requests.iter().take(8) {
        let method = METHODS[usize::from(*m) % METHODS.len()].clone();
        if http::Uri::try_from(path.as_str()).is_err() {
            continue;
        }
        let uri_path = http::Uri::try_from(path.as_str())
            .map(|u| u.path().to_string())
            .unwrap_or_default();
        let want = table
            .iter()
            .filter(|(p, _, ms)| {
                model_matches(p, &uri_path) && ms.as_ref().is_none_or(|ms| ms.contains(&method))
            })
            .max_by(|a, b| a.0.len().cmp(&b.0.len()).then(b.1.cmp(&a.1)))
            .map(|(_, i, _)| *i);
        assert_eq!(
            routes.route(method.clone(), path),
            want,
            "{method} {path:?}"
        );
    }
});
