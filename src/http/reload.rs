//! Reloading a layer's rules without losing the buckets of the rules that
//! stay: [`RateLimitLayer::reload`].

use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use super::builder::RateLimitLayerBuilder;
use super::key::KeySource;
use super::layer::{Compiled, RateLimitLayer, Shared, Table};
use super::policy::{ConfigError, Policy};
use crate::clock::{Clock, StdClock};
use crate::gcra::Gcra;
use crate::keyed::KeyedLimiter;
use crate::limiter::Bucket;
use crate::live::Inheritance;
use crate::queue::Queue;

/// The buckets a rule starts with: fresh, or carried from the configuration
/// a reload replaces.
pub(crate) struct Carried {
    pub(crate) table: Arc<Table>,
    pub(crate) queue: Option<Arc<Queue<Bucket<Gcra>>>>,
}

/// What a [`RateLimitLayer::reload`] did with each rule, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Rules that did not change: their buckets (and queues) carry on as
    /// they were.
    pub kept: Vec<String>,
    /// Rules whose quota or bucket kind changed but whose partitioning did
    /// not: every key's bucket carries on under the new quota, by the
    /// reload's [`Inheritance`] rule.
    pub reconfigured: Vec<String>,
    /// Rules that start with fresh buckets: new names, or rules whose key,
    /// `max_keys`, queueing or backend changed.
    pub fresh: Vec<String>,
    /// Rules of the old configuration that are gone.
    pub removed: Vec<String>,
}

/// Whether two policies partition requests the same way.
fn same_key(a: &KeySource, b: &KeySource) -> bool {
    match (a, b) {
        (KeySource::Global, KeySource::Global) | (KeySource::PeerIp, KeySource::PeerIp) => true,
        (KeySource::ClientIp(x), KeySource::ClientIp(y)) => x == y,
        (KeySource::Header(x), KeySource::Header(y)) => x == y,
        (KeySource::Custom(x), KeySource::Custom(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Decides, for a rule of the new configuration, which buckets it starts
/// with; records it in the report.
pub(crate) struct Carrier<'a> {
    pub(crate) previous: Option<&'a Shared>,
    pub(crate) how: Inheritance,
    pub(crate) report: ReloadReport,
}

impl Carrier<'_> {
    /// The buckets for `p`: carried from the previous rule of the same
    /// name when its partitioning is the same, else from `fresh`.
    pub(crate) fn buckets(
        &mut self,
        p: &Policy,
        fresh: impl FnOnce() -> Result<Table, ConfigError>,
    ) -> Result<Carried, ConfigError> {
        let old = self.previous.and_then(|s| {
            s.global
                .iter()
                .chain(s.policies.iter())
                .find(|c| c.name == p.name)
        });
        let Some(old) = old.filter(|c| partitioned_alike(&c.policy, p)) else {
            if self.previous.is_some() {
                self.report.fresh.push(p.name.clone());
            }
            return Ok(Carried {
                table: Arc::new(fresh()?),
                queue: None,
            });
        };
        let unchanged = old.policy.kind == p.kind && old.policy.quota == p.quota;
        if unchanged {
            self.report.kept.push(p.name.clone());
            return Ok(carried(old));
        }
        if old.policy.queue.is_some() {
            // a queue's bucket belongs to the queue: start afresh
            self.report.fresh.push(p.name.clone());
            return Ok(Carried {
                table: Arc::new(fresh()?),
                queue: None,
            });
        }
        let now = StdClock::new().now();
        old.table
            .reconfigure(Gcra::new(p.kind, p.quota), self.how, now);
        self.report.reconfigured.push(p.name.clone());
        Ok(carried(old))
    }

    /// Records the rules of the previous configuration that are gone.
    pub(crate) fn finish(mut self, names: &[&str]) -> ReloadReport {
        if let Some(s) = self.previous {
            for c in s.global.iter().chain(s.policies.iter()) {
                if !names.contains(&c.name.as_str()) {
                    self.report.removed.push(c.name.clone());
                }
            }
        }
        self.report
    }
}

fn carried(old: &Compiled) -> Carried {
    Carried {
        table: Arc::clone(&old.table),
        queue: old.queue.clone(),
    }
}

/// Same name aside: the same keys, table size, queueing and backend, so the
/// buckets mean the same thing under the new rule.
fn partitioned_alike(old: &Policy, new: &Policy) -> bool {
    same_key(&old.key, &new.key)
        && old.max_keys == new.max_keys
        && old.queue == new.queue
        && old.backend.is_none()
        && new.backend.is_none()
}

impl RateLimitLayer {
    /// Replaces the layer's rules with `builder`'s, for every clone of the
    /// layer and every service made from it, keeping the buckets of the
    /// rules that stay (matched by name):
    ///
    /// - a rule with the same key source, `max_keys`, queueing and no
    ///   backend keeps its buckets; if its quota or bucket kind changed,
    ///   each key's bucket carries over by `how` (see [`crate::live`]);
    /// - any other rule starts with fresh buckets (a remote backend's state
    ///   lives in its store anyway).
    ///
    /// Requests in flight finish under the configuration they started
    /// with. The new rules are validated first: on error nothing changes.
    ///
    /// ```
    /// use tollgate::http::{KeySource, LayerConfig, RateLimitLayer};
    /// use tollgate::Inheritance;
    ///
    /// let rules = |rate: u32| format!(
    ///     "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = {rate}\nperiod = \"1m\"\nkey = \"peer_ip\"\n"
    /// );
    /// let layer = LayerConfig::from_toml(&rules(100))?.build()?;
    /// let report = layer.reload(
    ///     LayerConfig::from_toml(&rules(50))?.into_builder()?,
    ///     Inheritance::UsedAmount,
    /// )?;
    /// assert_eq!(report.reconfigured, ["api"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The [`ConfigError`] of the new rules; the layer is then unchanged.
    pub fn reload(
        &self,
        builder: RateLimitLayerBuilder,
        how: Inheritance,
    ) -> Result<ReloadReport, ConfigError> {
        let previous = self.cell.load_full();
        let (shared, report) = builder.compile(Some((&previous, how)))?;
        self.cell.store(Arc::new(shared));
        Ok(report)
    }
}
