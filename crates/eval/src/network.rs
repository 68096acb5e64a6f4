//! A simulated multi-hop TSN network: IEEE 802.1Qbv switches with gate control lists, store-and-forward, one
//! shared real-time queue per egress port — and the network-wide schedule (talker offsets and GCLs).
//!
//! **Switch model.** A frame that started leaving the previous port at `t` is completely received at
//! `t + propagation + serialisation` (store-and-forward; serialisation of preamble, SFD and frame), and is
//! ready at its egress port `switching` later. Each egress port has one FIFO real-time queue shared by every
//! flow through it (the setting the paper's cascade needs: "multiple flows share the same queue") and a gate
//! control list that opens that queue only in its windows. The head frame starts at the first instant at or
//! after it is ready and the port is free at which the gate is open **and** the frame can finish before the
//! gate closes (802.1Qbv length-aware scheduling). Nothing is dropped: a frame that misses its window waits for
//! the next open window, whichever flow it was planned for. Best-effort traffic is not modelled in the network
//! (the gates keep it out of the real-time windows). The first hop (the talker's own NIC) is not gated: the
//! station model decides when frames leave it; fillers of keepon stations never get past it.
//!
//! **Schedule.** Why not `keepon-plan`: it plans one station's slot ring (which ring slots a class owns); the
//! network schedule is a different problem — no-wait talker offsets such that every flow's window is free on
//! every egress port of its path — and this one is small (12 flows, one 1 ms hyperperiod, each window 0.2 % of
//! it). [`schedule`] places flows in order at the earliest offset on a grid (keepon's slot period, so that a
//! keepon station can send exactly at it) whose windows overlap no earlier flow's on any shared port. The
//! windows are emitted in the taprio-style form (`sched-entry S <gate mask> <interval ns>`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// Link and switch timing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetSpec {
    /// Cable delay per link, ns (2 m: 10 ns).
    pub propagation: f64,
    /// Store-and-forward switching delay (from fully received to ready at the egress), ns. Assumption: 2.6 µs,
    /// which puts the three-switch path at the paper's 12.4 µs keepon delay.
    pub switching: f64,
    /// Time the gate stays open beyond one frame's serialisation, ns (slack for the talkers' jitter).
    pub guard: f64,
    /// Frame size (L2 incl. FCS), bytes.
    pub frame_bytes: u32,
    /// Hyperperiod (every flow's period), ns.
    pub period: f64,
}

impl NetSpec {
    /// Serialisation of one frame with preamble and SFD at 1 Gb/s, ns.
    pub fn ser(&self) -> f64 {
        f64::from(self.frame_bytes + 8) * 8.0
    }
    /// One switch: cable, full reception, switching.
    pub fn hop(&self) -> f64 {
        self.propagation + self.ser() + self.switching
    }
    /// The gate window length.
    pub fn window(&self) -> f64 {
        self.ser() + self.guard
    }
}

/// An egress port: (from node, to node).
pub type Port = (&'static str, &'static str);

/// One flow's route: talker, switches, listener.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Nodes from talker to listener.
    pub nodes: Vec<&'static str>,
}

impl Route {
    /// The egress ports along the route: the talker's NIC, then each switch's port towards the next node.
    pub fn ports(&self) -> Vec<Port> {
        self.nodes.windows(2).map(|w| (w[0], w[1])).collect()
    }
    /// Switches crossed.
    pub fn switches(&self) -> usize {
        self.nodes.len().saturating_sub(2)
    }
}

/// The network-wide schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Per flow, its talker offset within the hyperperiod, ns.
    pub offsets: Vec<f64>,
    /// Per gated egress port, its real-time windows `(open, close)` within the hyperperiod, sorted.
    pub gcl: BTreeMap<Port, Vec<(f64, f64)>>,
}

fn overlaps(a: (f64, f64), b: (f64, f64), period: f64) -> bool {
    // Circular intervals: compare each against the other shifted by −P, 0, +P.
    [-period, 0.0, period].iter().any(|s| a.0 < b.1 + s && b.0 + s < a.1)
}

/// Place every flow (in order) at the earliest grid offset whose windows are free on every port of its path.
pub fn schedule(net: &NetSpec, routes: &[Route], grid: f64) -> Result<Schedule, String> {
    schedule_in_order(net, routes, grid, &(0..routes.len()).collect::<Vec<_>>())
}

/// [`schedule`], placing the flows in `order` (indices into `routes`; each once): the window order on shared
/// ports follows from it. Offsets stay indexed by route.
pub fn schedule_in_order(net: &NetSpec, routes: &[Route], grid: f64, order: &[usize]) -> Result<Schedule, String> {
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if sorted != (0..routes.len()).collect::<Vec<_>>() {
        return Err(format!("the order {order:?} must name every one of the {} flows once", routes.len()));
    }
    if !(net.guard >= 0.0 && net.period > 0.0 && grid > 0.0 && net.propagation >= 0.0 && net.switching >= 0.0) {
        return Err(format!(
            "network timing must be non-negative with a positive period and grid (guard {}, period {}, grid {grid})",
            net.guard, net.period
        ));
    }
    let mut busy: HashMap<Port, Vec<(f64, f64)>> = HashMap::new();
    let mut offsets = vec![0.0; routes.len()];
    let mut gcl: BTreeMap<Port, Vec<(f64, f64)>> = BTreeMap::new();
    let steps = (net.period / grid).floor() as u64;
    for &f in order {
        let r = &routes[f];
        let ports = r.ports();
        let win = |o: f64, h: usize| {
            let s = (o + h as f64 * net.hop()).rem_euclid(net.period);
            (s, s + net.window())
        };
        let found = (0..steps).map(|k| k as f64 * grid).find(|&o| {
            ports
                .iter()
                .enumerate()
                .all(|(h, p)| busy.get(p).is_none_or(|v| v.iter().all(|&w| !overlaps(w, win(o, h), net.period))))
        });
        let o = found.ok_or_else(|| format!("flow {}: no offset on the {grid} ns grid fits the network", f + 1))?;
        for (h, p) in ports.iter().enumerate() {
            busy.entry(*p).or_default().push(win(o, h));
            if h > 0 {
                gcl.entry(*p).or_default().push(win(o, h));
            }
        }
        offsets[f] = o;
    }
    for v in gcl.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(Schedule { offsets, gcl })
}

impl Schedule {
    /// The GCLs in taprio's `sched-entry` form: gate mask 0x1 = the real-time queue, 0x2 = best effort; the
    /// intervals of each port add up to the hyperperiod (rounded to whole ns).
    pub fn taprio(&self, period: f64) -> String {
        let mut s = String::new();
        for (p, wins) in &self.gcl {
            let _ = writeln!(s, "# egress {} -> {} (cycle {} ns)", p.0, p.1, period as u64);
            let mut t = 0u64;
            for &(o, c) in wins {
                let (o, c) = (o.round() as u64, (c.round() as u64).min(period as u64));
                if o > t {
                    let _ = writeln!(s, "sched-entry S 02 {}", o - t);
                }
                let _ = writeln!(s, "sched-entry S 01 {}", c.saturating_sub(o.max(t)));
                t = c.max(t);
            }
            if (period as u64) > t {
                let _ = writeln!(s, "sched-entry S 02 {}", period as u64 - t);
            }
        }
        s
    }

    /// Earliest start `≥ t` at which a frame of serialisation `ser` fits in an open window of `port`. Every
    /// window is at least one serialisation long ([`schedule`] refuses a negative guard), so the search ends
    /// within two cycles.
    fn next_fit(&self, port: &Port, t: f64, ser: f64, period: f64) -> f64 {
        let Some(wins) = self.gcl.get(port) else { return t };
        let mut cycle = (t / period).floor();
        loop {
            for &(o, c) in wins {
                let (o, c) = (cycle * period + o, cycle * period + c);
                let start = t.max(o);
                if start + ser <= c + 1e-6 {
                    return start;
                }
            }
            cycle += 1.0;
        }
    }
}

/// One frame through the network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delivered {
    /// Flow index.
    pub flow: usize,
    /// Instance.
    pub seq: u64,
    /// Arrival of the first bit at the listener, ns (network time).
    pub arrival: f64,
}

/// Send every flow's frames through the network. `sent[f]` holds `(seq, time the first bit left the talker)`
/// in network time (frames that never left are simply absent).
pub fn forward(net: &NetSpec, routes: &[Route], sched: &Schedule, sent: &[Vec<(u64, f64)>]) -> Vec<Delivered> {
    // Process ports in an order where every port comes after the ports feeding it (the routes form a DAG).
    let mut order: Vec<Port> = Vec::new();
    let mut preds: HashMap<Port, Vec<Port>> = HashMap::new();
    for r in routes {
        let ps = r.ports();
        for (h, p) in ps.iter().enumerate() {
            let e = preds.entry(*p).or_default();
            if h > 0 {
                e.push(ps[h - 1]);
            }
        }
    }
    let mut keys: Vec<Port> = preds.keys().copied().collect();
    keys.sort();
    while order.len() < keys.len() {
        let before = order.len();
        for p in &keys {
            if !order.contains(p) && preds[p].iter().all(|q| order.contains(q)) {
                order.push(*p);
            }
        }
        if order.len() == before {
            break; // a cycle: cannot happen with the routes of a tree network
        }
    }
    // Departure time of (flow, seq) from each port of its path.
    let mut depart: HashMap<(usize, Port), HashMap<u64, f64>> = HashMap::new();
    for p in &order {
        let mut ready: Vec<(f64, usize, u64)> = Vec::new();
        for (f, r) in routes.iter().enumerate() {
            let ps = r.ports();
            let Some(h) = ps.iter().position(|q| q == p) else { continue };
            if h == 0 {
                let d = depart.entry((f, *p)).or_default();
                for &(seq, t) in &sent[f] {
                    d.insert(seq, t);
                }
                continue;
            }
            if let Some(prev) = depart.get(&(f, ps[h - 1])) {
                ready.extend(prev.iter().map(|(&seq, &t)| (t + net.hop(), f, seq)));
            }
        }
        if ready.is_empty() {
            continue;
        }
        ready.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut free = f64::NEG_INFINITY;
        for (t, f, seq) in ready {
            let start = sched.next_fit(p, t.max(free), net.ser(), net.period);
            free = start + net.ser() + 96.0;
            depart.entry((f, *p)).or_default().insert(seq, start);
        }
    }
    let mut out = Vec::new();
    for (f, r) in routes.iter().enumerate() {
        let Some(last) = r.ports().last().copied() else { continue };
        if let Some(d) = depart.get(&(f, last)) {
            out.extend(d.iter().map(|(&seq, &t)| Delivered { flow: f, seq, arrival: t + net.propagation }));
        }
    }
    out.sort_by(|a, b| a.flow.cmp(&b.flow).then(a.seq.cmp(&b.seq)));
    out
}
