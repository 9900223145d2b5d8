//! Reloading a layer's rules without losing the buckets of the rules that
//! stay: [`RateLimitLayer::reload`].

use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use super::RateLimitLayerBuilder;
use crate::key::KeySource;
use crate::layer::{Compiled, Gate, HttpStore, RateLimitLayer, Shared};
use crate::policy::{ConfigError, Plan, Policy, StoreAlg};
use tollgate_core::clock::Clock;
use tollgate_core::limiter::Inheritance;
use tollgate_queue::Queue;

/// What a [`RateLimitLayer::reload`] did with each rule, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Rules whose limit did not change: their buckets (and the requests
    /// waiting in their queues, and the permits in flight) carry on as
    /// they were.
    pub kept: Vec<String>,
    /// Rules whose quota, bucket kind, window, in-flight limit or queueing
    /// changed but whose partitioning did not: every key's state carries on
    /// under the new limit, by the reload's [`Inheritance`] rule (permits
    /// in flight stay in flight).
    pub reconfigured: Vec<String>,
    /// Rules that start with fresh buckets: new names, or rules whose key,
    /// `max_keys`, `ipv6_prefix`, kind of algorithm (bucket, fixed window,
    /// sliding window, in-flight limit) or backend changed.
    pub fresh: Vec<String>,
    /// Rules of the old configuration that are gone.
    pub removed: Vec<String>,
}

/// Whether two policies partition requests the same way.
fn same_key(a: &KeySource, b: &KeySource) -> bool {
    match (a, b) {
        (KeySource::Global, KeySource::Global)
        | (KeySource::PeerIp, KeySource::PeerIp)
        | (KeySource::ClientIp, KeySource::ClientIp)
        | (KeySource::ForwardedClientIp, KeySource::ForwardedClientIp) => true,
        (KeySource::Header(x), KeySource::Header(y)) => x == y,
        (KeySource::Custom(x), KeySource::Custom(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Decides, for a rule of the new configuration, which store it starts
/// with; records it in the report.
pub(crate) struct Carrier<'a> {
    pub(crate) previous: Option<&'a Shared>,
    pub(crate) how: Inheritance,
    pub(crate) report: ReloadReport,
}

impl<'a> Carrier<'a> {
    /// The previous rule named like `p`.
    fn old(&self, p: &Policy) -> Option<&'a Compiled> {
        let s = self.previous?;
        s.global
            .iter()
            .chain(s.policies.iter())
            .find(|c| c.name == p.name)
    }

    /// A rule whose buckets live in a remote backend: nothing to carry.
    pub(crate) fn remote(&mut self, p: &Policy) {
        if self.previous.is_some() {
            self.report.fresh.push(p.name.clone());
        }
    }

    /// How `p` running `plan` is charged: its store — the previous rule's
    /// of the same name when its partitioning is the same (reconfigured to
    /// `plan`), else from `fresh` — behind a queue if `p` queues (the
    /// previous rule's queue, with its waiters, when the store and the
    /// queue's settings are the same).
    pub(crate) fn gate(
        &mut self,
        p: &Policy,
        plan: &Plan,
        fresh: impl FnOnce() -> Result<HttpStore, ConfigError>,
    ) -> Result<Gate, ConfigError> {
        let (store, old_gate) = match self.store(p, plan, fresh)? {
            (store, Some(old)) => (store, old.gate.clone()),
            (store, None) => (store, None),
        };
        let Some(mode) = p.queue else {
            return Ok(Gate::Direct(store));
        };
        if let Some(Gate::Queued(queue)) = old_gate {
            let same = queue.limiter().same_table(&store)
                && queue.queue_limit() == mode.queue_limit
                && queue.max_wait() == Some(mode.max_wait);
            if same {
                // a raised limit may admit its waiters now
                queue.recheck();
                return Ok(Gate::Queued(queue));
            }
        }
        Ok(Gate::Queued(
            Queue::builder(store)
                .queue_limit(mode.queue_limit)
                .max_wait(mode.max_wait)
                .build(),
        ))
    }

    /// The store for `p` running `plan`, and the previous rule it was
    /// carried from (if any): see [`gate`](Self::gate).
    fn store(
        &mut self,
        p: &Policy,
        plan: &Plan,
        fresh: impl FnOnce() -> Result<HttpStore, ConfigError>,
    ) -> Result<(HttpStore, Option<&'a Compiled>), ConfigError> {
        let carried = self.old(p).and_then(|old| {
            let store = old.gate.as_ref()?.store().clone();
            partitioned_alike(&old.policy, &old.plan, p, plan).then_some((old, store))
        });
        let Some((old, store)) = carried else {
            if self.previous.is_some() {
                self.report.fresh.push(p.name.clone());
            }
            return Ok((fresh()?, None));
        };
        let unchanged = old.policy.algorithm == p.algorithm && old.policy.queue == p.queue;
        if !self.carry(&store, &old.plan, plan) {
            // cannot happen (same family); start afresh rather than lie
            self.report.fresh.push(p.name.clone());
            return Ok((fresh()?, None));
        }
        if unchanged {
            self.report.kept.push(p.name.clone());
        } else {
            self.report.reconfigured.push(p.name.clone());
        }
        Ok((store, Some(old)))
    }

    /// Runs `store`, carried from a rule running `old`, under `plan`
    /// (reconfigured, each key's state carried by the reload's rule);
    /// false if it cannot (another family of algorithm).
    fn carry(&self, store: &HttpStore, old: &Plan, plan: &Plan) -> bool {
        if old.alg == plan.alg {
            return true;
        }
        let now = self
            .previous
            .map_or(tollgate_core::time::Timestamp::ZERO, |s| s.clock.now());
        match plan.alg {
            StoreAlg::Gcra(a) => store.reconfigure(a, self.how, now).is_ok(),
            StoreAlg::Fixed(a) => store.reconfigure(a, self.how, now).is_ok(),
            StoreAlg::Sliding(a) => store.reconfigure(a, self.how, now).is_ok(),
            StoreAlg::InFlight(limit) => store.reconfigure_in_flight(limit).is_ok(),
        }
    }

    /// The network overflow table of `p` running `plan`: the previous
    /// rule's when its keys are partitioned alike and it tracks as many
    /// networks (reconfigured alike), else from `fresh`.
    pub(crate) fn networks(
        &mut self,
        p: &Policy,
        plan: &Plan,
        fresh: impl FnOnce() -> Result<HttpStore, ConfigError>,
    ) -> Result<HttpStore, ConfigError> {
        let carried = self.old(p).and_then(|old| {
            let networks = old.networks.as_ref()?;
            (partitioned_alike(&old.policy, &old.plan, p, plan)
                && super::overflow_networks(&old.policy, &old.plan)
                    == super::overflow_networks(p, plan)
                && self.carry(networks, &old.plan, plan))
            .then(|| networks.clone())
        });
        carried.map_or_else(fresh, Ok)
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

/// Same name aside: the same keys, table size, kind of algorithm and no
/// backend, so the buckets mean the same thing under the new rule.
fn partitioned_alike(old: &Policy, old_plan: &Plan, new: &Policy, new_plan: &Plan) -> bool {
    same_key(&old.key, &new.key)
        && old.max_keys == new.max_keys
        && old.ipv6_prefix == new.ipv6_prefix
        && old_plan.alg.same_family(&new_plan.alg)
        && old.backend.is_none()
        && new.backend.is_none()
}

impl RateLimitLayer {
    /// Replaces the layer's rules with `builder`'s, for every clone of the
    /// layer and every service made from it, keeping the buckets of the
    /// rules that stay (matched by name):
    ///
    /// - a rule with the same key source, `max_keys`, kind of algorithm
    ///   (token and leaky buckets, queueing or not, are one kind; fixed
    ///   windows, sliding windows and in-flight limits are one each) and no
    ///   backend keeps its store; if its quota, bucket kind, window, limit
    ///   or queueing changed, each key's state carries over by `how` (see
    ///   [`tollgate_core::live`]) and permits in flight stay held; with the same
    ///   queue settings it keeps its queue, and the requests waiting in it
    ///   keep their place (a raised in-flight limit admits them at once).
    ///   New queue settings start a new queue over the kept store: requests
    ///   already waiting stay in the old one, served by the same store (a
    ///   rate's by its timer, an in-flight limit's by the release of a
    ///   permit taken before the reload, or refused at their `max_wait`);
    /// - any other rule starts with a fresh store (a remote backend's state
    ///   lives in its store anyway).
    ///
    /// Requests in flight finish under the configuration they started
    /// with. The layer keeps its clock (see
    /// [`RateLimitLayerBuilder::clock`]). The new rules are validated
    /// first: on error nothing changes.
    ///
    /// ```
    /// use tollgate::http::LayerConfig;
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
