//! The Lua scripts the store runs inside Redis, one per algorithm.
//!
//! Each script is the core step of its algorithm, executed atomically by the
//! server with the server's own clock (`TIME`), so application clocks never
//! matter. Keys and numbers arrive as `KEYS`/`ARGV` (binary-safe bulk
//! strings); nothing is ever interpolated into the Lua source, which is what
//! keeps the SHA1 fixed (one `SCRIPT LOAD`, then `EVALSHA`).
//!
//! Redis Lua numbers are doubles, exact for integers below 2^53. A GCRA TAT
//! in nanoseconds since the Unix epoch (about 1.8·10^18) is not, so the
//! script never holds a whole TAT in a number: it stores the TAT as its
//! decimal string (the same `u64` an in-process [`GcraState`] holds, in the
//! server's time base), splits it into seconds and nanoseconds, and only
//! computes *leads* (`TAT − now`), which the store keeps below 2^53 ns by
//! refusing configurations whose largest lead is longer (about 104 days).
//!
//! The TAT is in whole nanoseconds for every quota: the store runs its
//! bucket in the rounded regime ([`Gcra::rounded`]), never in the `1/d` ns
//! units an exact in-process bucket uses. So the stored value keeps one
//! meaning across versions and quotas (replicas of a fleet upgraded one at
//! a time read each other's TATs), and leads keep the full 2^53 ns range.
//!
//! # New keys
//!
//! A check that finds its key absent creates it (a missing key is a full
//! bucket or an empty window, which a check of `n ≤ capacity` always
//! admits). The store budgets those creations (see
//! [`RedisConfig::new_keys_per_second`](crate::RedisConfig::new_keys_per_second)):
//! each check says whether it may create (`ARGV[3]`), and each reply ends
//! with what the key was, `0` present, `1` absent (and, for a check,
//! created), `2` absent while the check could not create it: then the
//! script wrote nothing and decided nothing (the first five fields are 0),
//! and the store asks the rule's overflow key instead. A peek or a refund
//! never creates a key.
//!
//! [`Gcra::rounded`]: tollgate_core::Gcra::rounded
//!
//! [`GcraState`]: tollgate_core::GcraState

/// GCRA (token and leaky bucket) step: check `n` (0 = peek) or refund `n`.
///
/// `KEYS[1]` = the bucket key.
/// `ARGV` = op (`"c"` check, `"r"` refund), n, may create (`"1"` if the
/// check may create the key, see [New keys](self#new-keys)), interval T, max lead
/// (capacity·T), empty lead (lead of a bucket "empty at now": capacity·T for
/// a token bucket, T for a leaky one), heal limit (max lead + heal
/// threshold), leaky (`"1"` for a leaky bucket). All in nanoseconds.
///
/// Returns `{allowed, lead, retry_after, now_s, now_us, key}`: `lead` is the
/// bucket's lead after the operation (after an admission, the new lead; on
/// a refusal or a peek, the current one), `retry_after` is 0 unless refused,
/// `now_s`/`now_us` the server time used, `key` what the key was (see
/// [New keys](self#new-keys)).
///
/// Writes only when the TAT changes (admission, heal, refund); the key
/// expires when its bucket has refilled (TAT ≤ now), so an idle key
/// vanishes and a missing key is a full bucket, exactly as in-process.
pub const GCRA_LUA: &str = r#"
local key = KEYS[1]
local op = ARGV[1]
local n = tonumber(ARGV[2])
local may_create = ARGV[3] == '1'
local interval = tonumber(ARGV[4])
local max_lead = tonumber(ARGV[5])
local empty_lead = tonumber(ARGV[6])
local heal_limit = tonumber(ARGV[7])
local leaky = ARGV[8] == '1'
local E9 = 1000000000

local t = redis.call('TIME')
local now_s = tonumber(t[1])
local now_us = tonumber(t[2])
local now_ns = now_us * 1000

-- the stored TAT, split into seconds and nanoseconds; a missing key is a
-- full bucket (TAT 0)
local tat_s, tat_ns = 0, 0
local raw = redis.call('GET', key)
if raw then
  if #raw > 9 then
    tat_s = tonumber(string.sub(raw, 1, -10))
    tat_ns = tonumber(string.sub(raw, -9))
  else
    tat_ns = tonumber(raw)
  end
  if tat_s == nil or tat_ns == nil then
    return redis.error_reply('tollgate: key does not hold a GCRA timestamp')
  end
end

-- what the key was: 0 present, 1 absent (a check creates it), 2 absent and
-- the check may not create it: nothing written, nothing decided
local fresh = 0
if not raw then
  fresh = 1
  if op == 'c' and n > 0 and not may_create then
    return {0, 0, 0, now_s, now_us, 2}
  end
end

-- max(TAT - now, 0); exact below 2^53, and only compared with heal_limit
-- (itself below 2^53) when larger
local lead = 0
local ds = tat_s - now_s
local dn = tat_ns - now_ns
if ds > 0 or (ds == 0 and dn > 0) then
  lead = ds * E9 + dn
end

-- store TAT = base + l as a decimal string, expiring when it has passed
local function store(base_s, base_ns, l)
  local r = math.fmod(l, E9)
  local s = base_s + (l - r) / E9
  local ns = base_ns + r
  if ns >= E9 then
    ns = ns - E9
    s = s + 1
  end
  local ttl_ms = math.floor((s - now_s) * 1000 + (ns - now_ns) / 1000000) + 1
  if ttl_ms < 1 then ttl_ms = 1 end
  redis.call('SET', key, string.format('%d%09d', s, ns), 'PX', ttl_ms)
end

if op == 'r' then
  -- refund: move the TAT back by n*T, never before now (no heal)
  local give_back = n * interval
  if lead == 0 or give_back == 0 then
    return {1, lead, 0, now_s, now_us, fresh}
  end
  if lead <= give_back then
    redis.call('DEL', key)
    return {1, 0, 0, now_s, now_us, fresh}
  end
  if lead <= heal_limit then
    store(now_s, now_ns, lead - give_back)
    return {1, lead - give_back, 0, now_s, now_us, fresh}
  end
  -- a TAT far ahead (the server clock went back): subtract exactly
  local r = math.fmod(give_back, E9)
  local s = tat_s - (give_back - r) / E9
  local ns = tat_ns - r
  if ns < 0 then
    ns = ns + E9
    s = s - 1
  end
  store(s, ns, 0)
  return {1, heal_limit, 0, now_s, now_us, fresh}
end

local healed = false
if lead > heal_limit then
  lead = empty_lead
  healed = true
end

if n == 0 then
  return {1, lead, 0, now_s, now_us, fresh}
end

local cost = n * interval
local admit_lead = 0
if not leaky then
  admit_lead = max_lead - cost
end

if lead > admit_lead then
  if healed then
    store(now_s, now_ns, empty_lead)
  end
  return {0, lead, lead - admit_lead, now_s, now_us, fresh}
end

local new_lead = lead + cost
store(now_s, now_ns, new_lead)
return {1, new_lead, 0, now_s, now_us, fresh}
"#;

/// Fixed window step: check `n` (0 = peek) or refund `n`.
///
/// The same rule as tollgate's in-process fixed window: at most `limit`
/// permits per window `[k·w, (k+1)·w)` aligned on multiples of `w` on the
/// server's clock (microseconds since the Unix epoch), a refusal takes
/// nothing and waits until the window ends, a stored window that starts
/// more than the heal threshold after `now` (the server clock went back) is
/// re-dated to the current window.
///
/// `KEYS[1]` = the window key. `ARGV` = op (`"c"` / `"r"`), n, may create
/// (`"1"` / `"0"`), limit, window length `w` in microseconds, heal threshold
/// in microseconds.
///
/// The key holds `"<k>:<count>"` and expires when its window ends (SET then
/// PEXPIREAT in the same script, so a counter never exists without an
/// expiry); a missing key or an older window is a count of 0.
///
/// Returns `{allowed, count, until_end_us, now_s, now_us, key}`: the count
/// of the effective window after the operation, the time until that window
/// ends, and what the key was (see [New keys](self#new-keys)).
pub const FIXED_WINDOW_LUA: &str = r#"
local key = KEYS[1]
local op = ARGV[1]
local n = tonumber(ARGV[2])
local may_create = ARGV[3] == '1'
local limit = tonumber(ARGV[4])
local w = tonumber(ARGV[5])
local heal = tonumber(ARGV[6])

local t = redis.call('TIME')
local now_s = tonumber(t[1])
local now_us = tonumber(t[2])
local now = now_s * 1000000 + now_us
local cur = (now - math.fmod(now, w)) / w

local index, count, healed = cur, 0, false
local raw = redis.call('GET', key)
-- what the key was: 0 present, 1 absent (a check creates it), 2 absent and
-- the check may not create it: nothing written, nothing decided
local fresh = 0
if not raw then
  fresh = 1
  if op == 'c' and n > 0 and not may_create then
    return {0, 0, 0, now_s, now_us, 2}
  end
end
if raw then
  local i, c = string.match(raw, '^(%d+):(%d+)$')
  if i == nil then
    return redis.error_reply('tollgate: key does not hold a window counter')
  end
  i = tonumber(i)
  c = tonumber(c)
  if i == cur then
    count = c
  elseif i > cur then
    if i * w - now > heal then
      count = c
      healed = true
    else
      index = i
      count = c
    end
  end
end

local until_end = (index + 1) * w - now

local function store(c)
  if c <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, string.format('%d:%d', index, c))
  redis.call('PEXPIREAT', key, math.floor((index + 1) * w / 1000) + 1)
end

if op == 'r' then
  if count > 0 and n > 0 then
    count = count - math.min(n, count)
    store(count)
  end
  return {1, count, until_end, now_s, now_us, fresh}
end

if n == 0 then
  return {1, count, until_end, now_s, now_us, fresh}
end

if count + n > limit then
  if healed then
    store(count)
  end
  return {0, count, until_end, now_s, now_us, fresh}
end

count = count + n
store(count)
return {1, count, until_end, now_s, now_us, fresh}
"#;
