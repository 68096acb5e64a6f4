//! A PTP port on a keepon station, sans-IO: the glue between the [`PtpEngine`] and a station (either timing,
//! [`StationFace`]: the slot station or the byte clock).
//!
//! - Event and general messages become frames of the configured [`Transport`], scheduled through the station's
//!   normal insertion path in the PTP class, each in its own place `lead` ahead (a slot the class owns, or on the
//!   byte clock a time inside one of its windows); an event message's TX time is its `Sent` outcome's time plus
//!   the MAC/PHY constant — exact, known when it is placed.
//! - Received frames are handed in with their RX time already converted to EPHC time; the configured RX
//!   latency is subtracted (with exact TX, an uncalibrated RX latency biases the slave by half of it).
//! - The engine's clock is a mirror of the station's EPHC, refreshed before every engine call; whatever the
//!   servo did to it is applied to the station with [`StationFace::adjust_clock`] (the schedule's grid moves too).
//! - With [`PtpPort::hold_adjustments`], the servo's adjustments are kept for the caller instead
//!   ([`PtpPort::take_adjustments`]): a dual clock lets PTP discipline its RX slot clock's phase and steers the
//!   station's EPHC with a loop of its own.
//! - Timers are kept here, in host time; call [`PtpPort::poll`] from the poll loop.
//! - With [`PortConfig::one_step`], a Sync is one-step: its place is chosen first, and its EPHC time plus
//!   the MAC/PHY constant — the TX time, known before the frame leaves — is written into it
//!   ([`crate::wire::make_one_step`]); no Follow_Up is sent. That needs a link whose slot time is the TX time (the
//!   simulated NIC, line-rate NICs): on host-paced links the TX time is known only after the host released the
//!   frame, and [`PtpPort::tx_on_release`] refuses a one-step port. Should a clock adjustment move the Sync's
//!   slot after it was written (a master does not steer, so this is not expected), the port reports
//!   [`PortError::OneStepOff`].
//!
//! - Over UDPv4 the port keeps the station a member of PTP's group `224.0.1.129` ([`crate::igmp`]): IGMPv2
//!   Membership Reports go out through the same class, at start, a second later, every minute and in answer to
//!   queries ([`PtpPort::on_igmp`]), so that a switch snooping IGMP forwards PTP to the station.
//!
//! Frame ids of PTP frames have the top bit set ([`PTP_ID_BIT`]); applications must not use such ids.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use keepon_core::ephc::ClockAdjust;
use keepon_core::isolation::ClassId;
use keepon_core::outcome::{Frame, FrameId, Outcome, Reason};
use keepon_core::time::{Nanos, Tai};

use crate::clock::EphcClock;
use crate::engine::{EngineConfig, Output, PtpEngine, Timer, TxToken};
use crate::gptp::policy::{Inbound, ProfilePolicy, ProfileStatus};
use crate::igmp::{self, Membership};
use crate::servo::ServoStatus;
use crate::wire::{make_one_step, sequence_id, Class, Transport, WireError, IP_PTP, MAC_PTP_PDELAY};
use keepon_core::face::{NextPlace, StationFace};

/// Frame ids with this bit set belong to the PTP port.
pub const PTP_ID_BIT: u64 = 1 << 63;

/// Configuration of a PTP port on a station.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// The engine.
    pub engine: EngineConfig,
    /// L2 or UDPv4.
    pub transport: Transport,
    /// The station's MAC address.
    pub mac: [u8; 6],
    /// The class PTP frames use (it must own slots, or on the byte clock windows).
    pub class: ClassId,
    /// How far ahead of the wire a PTP frame is scheduled (at least the insertion window's start).
    pub lead: Nanos,
    /// Added to a slot's EPHC time to get the TX timestamp (the MAC/PHY constant).
    pub tx_constant: Nanos,
    /// Subtracted from RX times (the calibrated RX latency).
    pub rx_latency: Nanos,
    /// Send one-step Sync (as master): the TX time written into the Sync, no Follow_Up. Only where the slot time
    /// is the TX time (see the module docs).
    pub one_step: bool,
    /// The neighbour delay up to which an 802.1AS port is asCapable (`neighborPropDelayThresh`).
    pub neighbor_prop_delay_thresh: Nanos,
}

/// A one-step port on a host-paced link: refused by [`PtpPort::tx_on_release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneStepNeedsSlotTime;

impl core::fmt::Display for OneStepNeedsSlotTime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "one-step Sync writes the TX time into the Sync before it leaves; on a host-paced link (no line \
             clock, e.g. veth) a frame leaves when the host releases it, later than its slot, and that time is \
             known only afterwards — use two-step Sync (one_step = false), whose Follow_Up carries the real TX time"
        )
    }
}

/// Problems the port reports (none of them stops it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortError {
    /// A received frame was not a PTP message of our transport.
    Wire(WireError),
    /// The station refused a PTP frame.
    Rejected(Reason),
    /// No place of the PTP class is within reach (no slot, or no window the frame fits, within a cycle).
    NoSlot,
    /// The station refused a clock adjustment (it stays unapplied).
    Adjust,
    /// A one-step Sync left this much later than the time written into it (a clock adjustment moved its slot
    /// after it was placed).
    OneStepOff(Nanos),
}

/// A PTP port on a station.
pub struct PtpPort {
    cfg: PortConfig,
    engine: PtpEngine<EphcClock>,
    clock: Rc<RefCell<EphcClock>>,
    timers: HashMap<Timer, Tai>,
    tokens: HashMap<FrameId, TxToken>,
    /// With [`PtpPort::tx_on_release`]: PTP frames sent, waiting for the time the backend released them.
    awaiting: HashMap<FrameId, (TxToken, Tai)>,
    /// One-step Syncs placed, with the slot time written into them (less the TX constant).
    one_step: HashMap<FrameId, Tai>,
    tx_on_release: bool,
    next_id: u64,
    /// Where the last PTP frame went ([`Place::mark`]): the next goes after it.
    last: Option<i128>,
    errors: Vec<PortError>,
    lag: TxLag,
    /// With [`PtpPort::hold_adjustments`]: the servo's adjustments not yet taken by the caller.
    held: Option<Vec<ClockAdjust>>,
    /// Over UDPv4: membership of PTP's group.
    membership: Option<Membership>,
    /// The profile's view of messages in and out ([`crate::gptp`]).
    policy: ProfilePolicy,
    /// Our Pdelay_Req in flight, by frame: their sequenceId (their TX times go to the policy's neighbour).
    pdelay_reqs: HashMap<FrameId, u16>,
    /// The frequency adjustment (ppt) the neighbour's rate ratio window started under.
    rate_base: i64,
}

/// How far behind their slots' times PTP event messages really left (host-paced links; see
/// [`PtpPort::on_released`]): the measured residual of the slot grid at the frames that carry time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxLag {
    /// Event messages with a release time.
    pub n: u64,
    /// Of these, times from the kernel's TX timestamp (the rest interpolated).
    pub stamped: u64,
    /// Sum of `release − slot time`, ns.
    pub sum: i128,
    /// Largest `release − slot time`, ns.
    pub max: i64,
    /// Smallest `release − slot time`, ns (negative: released before its place).
    pub min: i64,
    /// Released before their place: their TX time was taken as the place's.
    pub early: u64,
}

impl TxLag {
    fn add(&mut self, lag: i64, stamped: bool) {
        self.max = if self.n == 0 { lag } else { self.max.max(lag) };
        self.min = if self.n == 0 { lag } else { self.min.min(lag) };
        self.early += u64::from(lag < 0);
        self.n += 1;
        self.stamped += u64::from(stamped);
        self.sum += i128::from(lag);
    }

    /// Mean lag, ns.
    pub fn mean(&self) -> Option<i64> {
        (self.n > 0).then(|| (self.sum / i128::from(self.n)) as i64)
    }
}

const TIMER_ORDER: [Timer; 6] =
    [Timer::Bmca, Timer::AnnounceReceipt, Timer::Announce, Timer::Sync, Timer::DelayRequest, Timer::FilterUpdate];

impl PtpPort {
    /// A port on `station` (which must be up), at host time `now`.
    pub fn new<S: StationFace>(cfg: PortConfig, station: &mut S, now: Tai, seed: u64) -> PtpPort {
        let clock = Rc::new(RefCell::new(EphcClock::of_station(station, now)));
        let (engine, outs) = PtpEngine::new(cfg.engine, clock.clone(), seed);
        let mut p = PtpPort {
            cfg,
            engine,
            clock,
            timers: HashMap::new(),
            tokens: HashMap::new(),
            awaiting: HashMap::new(),
            one_step: HashMap::new(),
            tx_on_release: false,
            next_id: 0,
            last: None,
            errors: Vec::new(),
            lag: TxLag::default(),
            held: None,
            membership: match cfg.transport {
                Transport::UdpV4 { .. } => Some(Membership::new(IP_PTP, now)),
                Transport::L2 => None,
            },
            policy: ProfilePolicy::new(cfg.engine.profile, cfg.engine.identity, cfg.neighbor_prop_delay_thresh),
            pdelay_reqs: HashMap::new(),
            rate_base: 0,
        };
        p.outputs(outs, station, now);
        p
    }

    /// IGMP membership reports sent so far (over UDPv4; `None` over L2).
    pub fn membership_reports(&self) -> Option<u32> {
        self.membership.map(|m| m.sent())
    }

    /// If `frame` is an IGMP Membership Query (over UDPv4), take it at host time `now` — a report for PTP's
    /// group follows within its response time if it asks for that group or all — and return true.
    pub fn on_igmp(&mut self, frame: &[u8], now: Tai) -> bool {
        let (Some(m), Some(q)) = (&mut self.membership, igmp::query(frame)) else { return false };
        m.on_query(q, now);
        true
    }

    /// Send the membership report if one is due (into the next PTP place, like any PTP frame).
    fn report_membership<S: StationFace>(&mut self, station: &mut S, now: Tai) {
        let (Some(m), Transport::UdpV4 { src }) = (self.membership, self.cfg.transport) else { return };
        if !m.due(now) {
            return;
        }
        let frame = igmp::report(self.cfg.mac, src, m.group());
        // Placed or refused (the refusal is reported): either way the next report follows on schedule.
        let _ = self.place(frame.len(), station).and_then(|p| self.hand_in(frame, p, station, now));
        if let Some(m) = &mut self.membership {
            m.on_sent(now);
        }
    }

    /// The engine (state, master/slave, UTC offset).
    pub fn engine(&self) -> &PtpEngine<EphcClock> {
        &self.engine
    }

    /// The profile's view: asCapable, the neighbour, what was dropped or held back.
    pub fn profile_status(&self) -> ProfileStatus {
        self.policy.status()
    }

    /// The servo's status.
    pub fn servo_status(&self) -> ServoStatus {
        self.engine.servo_status()
    }

    /// Problems since the last call.
    pub fn take_errors(&mut self) -> Vec<PortError> {
        core::mem::take(&mut self.errors)
    }

    /// Refresh the engine's clock from the station at host time `now`.
    fn mirror<S: StationFace>(&mut self, station: &S, now: Tai) {
        *self.clock.borrow_mut() = EphcClock::of_station(station, now);
    }

    /// Keep the servo's clock adjustments for the caller ([`PtpPort::take_adjustments`]) instead of applying them
    /// to the station. For a dual clock (`keepon_core::dualclock`): the Sync RX times then come from the RX slot
    /// clock, whose phase PTP disciplines, while the caller steers the station's EPHC to it. The engine's clock
    /// is still refreshed from the station before every call, so adjustments the caller does not apply to the
    /// station are forgotten by the servo's clock (a servo that steps at every Sync, such as
    /// [`crate::servo::ServoKind::MovingAverage`], suits this use).
    pub fn hold_adjustments(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// Apply the servo's adjustments to the station again (undoes [`PtpPort::hold_adjustments`]; adjustments
    /// still held are dropped).
    pub fn release_adjustments(&mut self) {
        self.held = None;
    }

    /// The servo's adjustments held since the last call (empty unless [`PtpPort::hold_adjustments`]), in order.
    pub fn take_adjustments(&mut self) -> Vec<ClockAdjust> {
        self.held.as_mut().map(core::mem::take).unwrap_or_default()
    }

    fn apply<S: StationFace>(&mut self, station: &mut S) {
        let adj = self.clock.borrow_mut().take_adjustments();
        for (_, a) in &adj {
            // The neighbour's rate ratio is read on this clock: a step or a change beyond 1 ppm restarts it.
            let changed = match *a {
                ClockAdjust::Step(_) => true,
                ClockAdjust::Rate(ppt) => (ppt - self.rate_base).abs() > 1_000_000,
            };
            if changed {
                self.rate_base = match *a {
                    ClockAdjust::Rate(ppt) => ppt,
                    ClockAdjust::Step(_) => self.rate_base,
                };
                self.policy.on_clock_change();
            }
        }
        if let Some(held) = &mut self.held {
            held.extend(adj.into_iter().map(|(_, a)| a));
            return;
        }
        for (_, a) in adj {
            if station.adjust_clock(a).is_err() {
                self.errors.push(PortError::Adjust);
            }
        }
    }

    fn outputs<S: StationFace>(&mut self, outs: Vec<Output>, station: &mut S, now: Tai) {
        for mut o in outs {
            if let Output::SendEvent { data, .. } | Output::SendGeneral { data } = &mut o {
                if !self.policy.outbound(data) {
                    continue;
                }
            }
            match o {
                Output::SetTimer { timer, after } => {
                    self.timers.insert(timer, now + after);
                }
                Output::SendEvent { mut data, token }
                    if self.cfg.one_step && data.first().is_some_and(|b| b & 0x0F == 0x0) =>
                {
                    self.one_step_sync(&mut data, token, station, now);
                }
                Output::SendEvent { data, token } => {
                    if let Some(id) = self.submit(&data, station, now) {
                        self.tokens.insert(id, token);
                        if data.first().is_some_and(|b| b & 0x0F == 0x2) {
                            self.pdelay_reqs.extend(sequence_id(&data).map(|seq| (id, seq)));
                        }
                    }
                }
                Output::SendGeneral { data } => {
                    let _ = self.submit(&data, station, now);
                }
            }
        }
    }

    /// Send `sync` one-step: into the next place, carrying its EPHC time plus the TX constant, and tell the
    /// engine it left then (no Follow_Up). A Sync that cannot carry its time goes two-step.
    fn one_step_sync<S: StationFace>(&mut self, sync: &mut [u8], token: TxToken, station: &mut S, now: Tai) {
        // The frame's length decides its place on the byte clock; writing the time does not change it.
        let Some(probe) = self.frame_of(sync, station) else { return };
        let Some(place) = self.place(probe.len(), station) else { return };
        let tx = place.tx + self.cfg.tx_constant;
        if make_one_step(sync, tx).is_err() {
            if let Some(id) = self.hand_in(probe, place, station, now) {
                self.tokens.insert(id, token);
            }
            return;
        }
        let Some(seq) = sequence_id(sync) else { return };
        let Some(data) = self.frame_of(sync, station) else { return };
        let Some(id) = self.hand_in(data, place, station, now) else { return };
        self.one_step.insert(id, place.tx);
        self.mirror(station, now);
        let outs = self.engine.on_one_step_sent(token, seq, tx);
        self.apply(station);
        self.outputs(outs, station, now);
    }

    /// The next place for a PTP frame of `len` bytes at least `lead` ahead (after the last one taken).
    fn place<S: StationFace>(&mut self, len: usize, station: &S) -> Option<NextPlace> {
        let Some(p) = station.next_place(self.cfg.class, self.cfg.lead, len, self.last) else {
            self.errors.push(PortError::NoSlot);
            return None;
        };
        self.last = Some(p.mark);
        Some(p)
    }

    /// The frame carrying `msg` (padded to what the station fills anyway).
    fn frame_of<S: StationFace>(&mut self, msg: &[u8], station: &S) -> Option<Vec<u8>> {
        match self.cfg.transport.emit_for_slot(self.cfg.mac, msg, station.pad_to()) {
            // 802.1AS over L2: every message to the link-local address, not only peer delay (the profiles refuse
            // UDPv4).
            Ok(mut data) if self.policy.profile().is_802_1as() && self.cfg.transport == Transport::L2 => {
                data[..6].copy_from_slice(&MAC_PTP_PDELAY);
                Some(data)
            }
            Ok(data) => Some(data),
            Err(e) => {
                self.errors.push(PortError::Wire(e));
                None
            }
        }
    }

    /// Schedule a message into the next place.
    fn submit<S: StationFace>(&mut self, msg: &[u8], station: &mut S, now: Tai) -> Option<FrameId> {
        let data = self.frame_of(msg, station)?;
        let place = self.place(data.len(), station)?;
        self.hand_in(data, place, station, now)
    }

    /// Hand a frame in at `place` (from [`PtpPort::place`]).
    fn hand_in<S: StationFace>(
        &mut self,
        data: Vec<u8>,
        place: NextPlace,
        station: &mut S,
        now: Tai,
    ) -> Option<FrameId> {
        self.next_id += 1;
        let id = FrameId(PTP_ID_BIT | self.next_id);
        match station.submit(Frame { id, class: self.cfg.class, txtime: Some(place.txtime), data }, now) {
            Ok(()) => Some(id),
            Err(why) => {
                self.errors.push(PortError::Rejected(why));
                None
            }
        }
    }

    /// A frame arrived; `rx` is its arrival in EPHC time (before the RX latency correction).
    /// An IGMP query (over UDPv4) is taken as by [`PtpPort::on_igmp`].
    pub fn on_rx<S: StationFace>(&mut self, frame: &[u8], rx: Tai, station: &mut S, now: Tai) {
        if self.on_igmp(frame, now) {
            return;
        }
        let (msg, class) = match self.cfg.transport.parse(frame) {
            Ok(m) => m,
            Err(e) => {
                self.errors.push(PortError::Wire(e));
                return;
            }
        };
        let rx = rx - self.cfg.rx_latency;
        let announce = match self.policy.inbound(msg, rx) {
            Inbound::Drop => return,
            Inbound::Take => None,
            Inbound::TakeWithAnnounce(a) => Some(a),
        };
        self.mirror(station, now);
        let mut outs = match class {
            Class::Event => self.engine.on_event(msg, rx),
            Class::General => self.engine.on_general(msg),
        };
        if let Some(a) = announce {
            outs.extend(self.engine.on_general(&a));
        }
        self.apply(station);
        self.outputs(outs, station, now);
    }

    /// Event message `id` left at `tx` (EPHC time, the TX constant added): if it is our Pdelay_Req, the
    /// neighbour's bookkeeping takes it.
    fn sent_at(&mut self, id: FrameId, tx: Tai) {
        if let Some(seq) = self.pdelay_reqs.remove(&id) {
            self.policy.on_request_sent(seq, tx);
        }
    }

    /// An outcome from the station: if it is a PTP frame's, it is consumed here (returns true).
    pub fn on_outcome<S: StationFace>(&mut self, o: &Outcome, station: &mut S, now: Tai) -> bool {
        if o.id.0 & PTP_ID_BIT == 0 {
            return false;
        }
        if let Some(written) = self.one_step.remove(&o.id) {
            match o.result {
                Ok(sent) if sent.time != written => self.errors.push(PortError::OneStepOff(sent.time - written)),
                Ok(_) => {}
                Err(why) => self.errors.push(PortError::Rejected(why)),
            }
            return true;
        }
        let token = self.tokens.remove(&o.id);
        match (o.result, token) {
            (Ok(sent), Some(token)) if self.tx_on_release => {
                self.awaiting.insert(o.id, (token, sent.time));
            }
            (Ok(sent), Some(token)) => {
                self.sent_at(o.id, sent.time + self.cfg.tx_constant);
                self.mirror(station, now);
                let outs = self.engine.on_tx_time(token, sent.time + self.cfg.tx_constant);
                self.apply(station);
                self.outputs(outs, station, now);
            }
            (Err(why), _) => {
                self.pdelay_reqs.remove(&o.id);
                self.errors.push(PortError::Rejected(why))
            }
            (Ok(_), None) => {}
        }
        true
    }

    /// Take event messages' TX times from when the backend released them ([`PtpPort::on_released`]) instead of
    /// their slot's time: for host-paced links, where a slot released late leaves late. Refused for a one-step
    /// port, which must know the TX time before the frame leaves.
    pub fn tx_on_release(&mut self) -> Result<(), OneStepNeedsSlotTime> {
        if self.cfg.one_step {
            return Err(OneStepNeedsSlotTime);
        }
        self.tx_on_release = true;
        Ok(())
    }

    /// The receive latency the port takes off every RX time (`PortConfig::rx_latency`).
    pub fn rx_latency(&self) -> Nanos {
        self.cfg.rx_latency
    }

    /// The transport the port speaks.
    pub fn transport(&self) -> Transport {
        self.cfg.transport
    }

    /// How far behind their slots PTP event messages left, so far.
    pub fn tx_lag(&self) -> TxLag {
        self.lag
    }

    /// The backend released frame `id` at host time `released` (`None`: it does not say; `stamped`: the time
    /// is the kernel's TX timestamp): if it is a PTP event message waiting for its TX time, hand the engine the
    /// later of its slot time and its release, converted to EPHC time (returns true for PTP frames).
    pub fn on_released<S: StationFace>(
        &mut self,
        id: FrameId,
        released: Option<Tai>,
        stamped: bool,
        station: &mut S,
        now: Tai,
    ) -> bool {
        if id.0 & PTP_ID_BIT == 0 {
            return false;
        }
        if let Some((token, slot_time)) = self.awaiting.remove(&id) {
            let left = released.map(|r| station.ephc_at(r));
            if let Some(left) = left {
                self.lag.add((left - slot_time).0, stamped);
            }
            let tx = left.map_or(slot_time, |l| l.max(slot_time));
            self.sent_at(id, tx + self.cfg.tx_constant);
            self.mirror(station, now);
            let outs = self.engine.on_tx_time(token, tx + self.cfg.tx_constant);
            self.apply(station);
            self.outputs(outs, station, now);
        }
        true
    }

    /// Fire the timers due at host time `now`.
    pub fn poll<S: StationFace>(&mut self, station: &mut S, now: Tai) {
        let mut due: Vec<(Tai, usize, Timer)> = TIMER_ORDER
            .iter()
            .enumerate()
            .filter_map(|(o, k)| self.timers.get(k).filter(|t| **t <= now).map(|t| (*t, o, *k)))
            .collect();
        due.sort_by_key(|(t, o, _)| (*t, *o));
        for (_, _, t) in due {
            self.timers.remove(&t);
            self.mirror(station, now);
            let outs = self.engine.on_timer(t);
            self.apply(station);
            self.outputs(outs, station, now);
        }
        self.report_membership(station, now);
    }
}
