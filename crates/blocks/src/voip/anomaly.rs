//! `sip_anomaly`: the VoIP anomaly detector (Blockmon's VoIP application) over the SIP
//! messages of a `sip` block. Per source address and interval it counts INVITEs, failures
//! (final 4xx–6xx answers to its INVITEs, challenges 401/407 aside) and short calls (answered
//! calls it ended or that were ended within `short_call` of the answer); each count is watched
//! by the SYN-flood detector's machinery (a count-min sketch per interval, a non-parametric
//! CUSUM per cell, a Space-Saving summary naming the sources), so a rate that rises above a
//! source's learned level raises an alarm and its end clears it. Scanning (SIPVicious'
//! `svwar`/`svmap`: one source asking for many users) is a count over a window: many distinct
//! To users in its requests, or many 404s answered to it.
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, Pool, TimerId};
use trawl_detect::cusum::CusumConfig;
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector, SynFloodEvent};
use trawl_voip::sip::name_addr;
use trawl_voip::SipEvent;

use super::{SipBatch, SIP};
use crate::messages::{Event, Events, EVENTS};

const SECOND: u64 = 1_000_000_000;

/// The rates watched, in the order of [`SipAnomaly::rates`].
const KINDS: [&str; 3] = ["invite_flood", "failures", "short_calls"];

/// Settings of `sip_anomaly`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipAnomalySettings {
    /// Interval of the rates (default 1s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub interval: Option<u64>,
    /// CUSUM drift: the rise over a source's normal rate tolerated, per interval (default 10).
    pub drift: Option<f64>,
    /// CUSUM alarm threshold, per interval (default 20).
    pub threshold: Option<f64>,
    /// Intervals at the start that only learn the normal rates (default 5).
    pub warmup: Option<u64>,
    /// A call answered and ended within this is short (default 2s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub short_call: Option<u64>,
    /// Window of the scan counts (default 10s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub scan_window: Option<u64>,
    /// Distinct To users one source asks for within the window that make a scan (default 20).
    pub scan_users: Option<usize>,
    /// 404s answered to one source within the window that make a scan (default 20).
    pub scan_not_found: Option<u64>,
    /// Sources and answered calls followed at once (default 65536 each).
    pub max_sources: Option<usize>,
}

/// The settings, defaults filled in and checked.
#[derive(Clone, Copy, Debug)]
struct Config {
    rates: SynFloodConfig,
    short_call_ns: u64,
    scan_window_ns: u64,
    scan_users: usize,
    scan_not_found: u64,
    max_sources: usize,
}

impl SipAnomalySettings {
    fn config(&self) -> Result<Config, String> {
        let d = SynFloodConfig::default();
        let threshold = self.threshold.unwrap_or(d.cusum.threshold);
        let drift = self.drift.unwrap_or(d.cusum.drift);
        if drift <= 0.0 || threshold < 0.0 {
            return Err("need drift > 0 and threshold >= 0".into());
        }
        let interval_ns = self.interval.unwrap_or(SECOND);
        if interval_ns < 1_000_000 {
            return Err("`interval` must be at least 1ms".into());
        }
        let c = Config {
            rates: SynFloodConfig {
                interval_ns,
                cusum: CusumConfig {
                    threshold,
                    drift,
                    ceiling: 2.0 * threshold,
                    warmup: self.warmup.unwrap_or(d.cusum.warmup),
                    ..d.cusum
                },
                ..d
            },
            short_call_ns: self.short_call.unwrap_or(2 * SECOND),
            scan_window_ns: self.scan_window.unwrap_or(10 * SECOND),
            scan_users: self.scan_users.unwrap_or(20),
            scan_not_found: self.scan_not_found.unwrap_or(20),
            max_sources: self.max_sources.unwrap_or(65536),
        };
        if c.scan_window_ns == 0 || c.scan_users == 0 || c.scan_not_found == 0 {
            return Err("`scan_window`, `scan_users` and `scan_not_found` must be positive".into());
        }
        if c.max_sources == 0 || c.max_sources > 1 << 24 {
            return Err("`max_sources` must be in 1..=16777216".into());
        }
        Ok(c)
    }
}

/// One source's scan window.
struct Scan {
    start_ns: u64,
    /// Hashes of the distinct To users asked for (at most `scan_users`).
    users: Vec<u64>,
    not_found: u64,
    requests: u64,
    user_agent: String,
    reported: bool,
}

/// An answered call: its caller and the answer's time.
struct Answered {
    caller: IpAddr,
    answer_ns: u64,
}

/// The detector block.
pub struct SipAnomaly {
    cfg: Config,
    /// INVITEs, failures and short calls per source ([`KINDS`]).
    rates: [SynFloodDetector; 3],
    found: Vec<SynFloodEvent>,
    scans: HashMap<IpAddr, Scan>,
    calls: HashMap<String, Answered>,
    out: Vec<Event>,
    pool: Pool<Events>,
    counters: Vec<Counter>,
    /// Alarms raised, scans, messages seen.
    totals: [u64; 3],
    /// The last message's time, when it came, and whether it was captured live.
    last: Option<(u64, Instant, bool)>,
}

/// How often a quiet live input's clock is moved on by wall time (so an alarm ends, or the
/// interval of a burst closes, without waiting for more SIP).
const TICK: Duration = Duration::from_secs(1);

/// The counters `sip_anomaly` shows, in the order of [`SipAnomaly::totals`].
const COUNTERS: [&str; 3] = ["alarms", "scans", "messages"];

impl Block for SipAnomaly {
    const TYPE: &'static str = "sip_anomaly";
    const SUMMARY: &'static str = "VoIP anomalies per source: INVITE floods, failures and short \
        calls (CUSUM, as synflood), and scanning (many users or 404s)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "sip",
        ty: SIP,
        required: true,
        doc: "SIP messages from a `sip` block",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "alarms",
        ty: EVENTS,
        required: false,
        doc: "start and end of each rate alarm, and each scan (`detector` = `sip_anomaly`)",
    }];
    type Settings = SipAnomalySettings;

    fn check(s: &SipAnomalySettings) -> Result<(), String> {
        s.config().map(|_| ())
    }

    fn build(s: SipAnomalySettings, _env: &BuildEnv) -> Result<Self, String> {
        let cfg = s.config()?;
        let detector = |i: u64| {
            SynFloodDetector::new(SynFloodConfig {
                seed: cfg.rates.seed ^ i,
                ..cfg.rates
            })
        };
        Ok(SipAnomaly {
            cfg,
            rates: [detector(1), detector(2), detector(3)],
            found: Vec::new(),
            scans: HashMap::new(),
            calls: HashMap::new(),
            out: Vec::new(),
            pool: Pool::new(Events::default),
            counters: Vec::new(),
            totals: [0; 3],
            last: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = COUNTERS.iter().map(|n| ctx.counter(n)).collect();
        ctx.every(TICK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        let Some((ts, at, true)) = self.last else {
            return;
        };
        let idle = at.elapsed();
        if idle < TICK {
            return;
        }
        let now = ts + idle.as_nanos() as u64;
        for (kind, d) in self.rates.iter_mut().enumerate() {
            d.advance_to(now, &mut self.found);
            Self::rate_events(&mut self.found, kind, &mut self.out, &mut self.totals);
        }
        self.send(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(batch) = msg.get::<SipBatch>() else {
            return;
        };
        for ev in &batch.events {
            self.message(ev);
        }
        if let Some(ev) = batch.events.last() {
            self.last = Some((ev.ts_ns, Instant::now(), batch.live));
        }
        self.send(ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for (kind, d) in self.rates.iter_mut().enumerate() {
            d.finish(&mut self.found);
            Self::rate_events(&mut self.found, kind, &mut self.out, &mut self.totals);
        }
        self.send(ctx);
    }
}

/// An address as the sketches key it: IPv4 mapped into IPv6.
fn key(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn user_hash(to: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name_addr(to).user.to_ascii_lowercase().hash(&mut h);
    h.finish()
}

impl SipAnomaly {
    /// Takes one message into the rates and the scan windows.
    fn message(&mut self, ev: &SipEvent) {
        self.totals[2] += 1;
        let ts = ev.ts_ns;
        let request = ev.method.is_some();
        let invite = ev.is("INVITE");
        let answers_invite = !request && ev.cseq_method.eq_ignore_ascii_case("INVITE");
        // Failures are the requester's: the response goes back to it.
        let failure =
            answers_invite && (400..=699).contains(&ev.code) && !matches!(ev.code, 401 | 407);
        let short = self.short_call(ev, answers_invite);
        let counted = [
            (ev.src.ip(), invite && ev.cseq > 0),
            (ev.dst.ip(), failure),
            (short.unwrap_or(ev.src.ip()), short.is_some()),
        ];
        for (kind, (ip, yes)) in counted.into_iter().enumerate() {
            self.rates[kind].observe(ts, &key(ip), yes, &mut self.found);
            Self::rate_events(&mut self.found, kind, &mut self.out, &mut self.totals);
        }
        if request {
            self.scan(ev.src.ip(), ts, |s| {
                s.requests += 1;
                if s.user_agent.is_empty() {
                    s.user_agent.clone_from(&ev.user_agent);
                }
                Some(user_hash(&ev.to))
            });
        } else if ev.code == 404 {
            self.scan(ev.dst.ip(), ts, |s| {
                s.not_found += 1;
                None
            });
        }
    }

    /// Follows answered calls; the caller of a call that ends within `short_call` of its
    /// answer.
    fn short_call(&mut self, ev: &SipEvent, answers_invite: bool) -> Option<IpAddr> {
        if answers_invite && (200..=299).contains(&ev.code) {
            if self.calls.len() >= self.cfg.max_sources {
                let horizon = ev.ts_ns.saturating_sub(self.cfg.short_call_ns);
                self.calls.retain(|_, a| a.answer_ns >= horizon);
            }
            if self.calls.len() < self.cfg.max_sources {
                self.calls.entry(ev.call_id.clone()).or_insert(Answered {
                    caller: ev.dst.ip(),
                    answer_ns: ev.ts_ns,
                });
            }
            return None;
        }
        if !ev.is("BYE") {
            return None;
        }
        let a = self.calls.remove(&ev.call_id)?;
        (ev.ts_ns.saturating_sub(a.answer_ns) < self.cfg.short_call_ns).then_some(a.caller)
    }

    /// Updates `ip`'s scan window with `f` (which may name a To user asked for) and reports
    /// the scan once it crosses a limit.
    fn scan(&mut self, ip: IpAddr, ts: u64, f: impl FnOnce(&mut Scan) -> Option<u64>) {
        let window = self.cfg.scan_window_ns;
        if !self.scans.contains_key(&ip) {
            if self.scans.len() >= self.cfg.max_sources {
                self.scans
                    .retain(|_, s| ts.saturating_sub(s.start_ns) < window);
            }
            if self.scans.len() >= self.cfg.max_sources {
                return;
            }
        }
        let s = self.scans.entry(ip).or_insert_with(|| Scan {
            start_ns: ts,
            users: Vec::new(),
            not_found: 0,
            requests: 0,
            user_agent: String::new(),
            reported: false,
        });
        if ts.saturating_sub(s.start_ns) >= window {
            *s = Scan {
                start_ns: ts,
                users: Vec::new(),
                not_found: 0,
                requests: 0,
                user_agent: String::new(),
                reported: false,
            };
        }
        if let Some(user) = f(s) {
            if s.users.len() < self.cfg.scan_users && !s.users.contains(&user) {
                s.users.push(user);
            }
        }
        let crossed =
            s.users.len() >= self.cfg.scan_users || s.not_found >= self.cfg.scan_not_found;
        if crossed && !s.reported {
            s.reported = true;
            self.totals[1] += 1;
            self.out.push(Event {
                ts_ns: ts,
                json: json!({
                    "detector": "sip_anomaly",
                    "event": "scan",
                    "source": ip.to_string(),
                    "start_ns": s.start_ns,
                    "detected_ns": ts,
                    "to_users": s.users.len(),
                    "not_found": s.not_found,
                    "requests": s.requests,
                    "user_agent": s.user_agent,
                }),
            });
        }
    }

    /// The rate detector `kind`'s new events as alarms.
    fn rate_events(
        found: &mut Vec<SynFloodEvent>,
        kind: usize,
        out: &mut Vec<Event>,
        totals: &mut [u64; 3],
    ) {
        for e in found.drain(..) {
            let (ts_ns, mut j): (u64, Value) = match e {
                SynFloodEvent::Start {
                    victim,
                    onset_ns,
                    detected_ns,
                    rate,
                } => {
                    totals[0] += 1;
                    (
                        detected_ns,
                        json!({"event": "start", "source": victim.to_string(),
                            "onset_ns": onset_ns, "detected_ns": detected_ns, "rate": rate}),
                    )
                }
                SynFloodEvent::End {
                    victim,
                    onset_ns,
                    end_ns,
                    peak_rate,
                    syns,
                    // Keyed by the SIP source already: its "sources" are itself.
                    top_sources: _,
                } => (
                    end_ns,
                    json!({"event": "end", "source": victim.to_string(), "onset_ns": onset_ns,
                        "end_ns": end_ns, "peak_rate": peak_rate, "count": syns}),
                ),
            };
            if let Some(o) = j.as_object_mut() {
                o.insert("detector".into(), "sip_anomaly".into());
                o.insert("kind".into(), KINDS[kind].into());
            }
            out.push(Event { ts_ns, json: j });
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        for (c, v) in self.counters.iter().zip(self.totals) {
            c.set(v);
        }
        if self.out.is_empty() {
            return;
        }
        let mut slot = self.pool.take();
        let batch = slot.get_mut();
        batch.events.clear();
        batch.events.append(&mut self.out);
        ctx.emit(0, slot.into_msg());
    }
}
