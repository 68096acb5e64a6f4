//! Isolation: which traffic class owns which ring slot (paper §5.1).
//!
//! The ring has `N` slots; absolute slot `k` is ring slot `k mod N`. Each real-time class owns a set of ring
//! slots (the prototype's `slot_masks`, bit `i` = ring slot `i`); the sets are disjoint. Slots no class owns
//! are best effort. A class with no slots is a best-effort class: its frames have no txtime and go FIFO into
//! free unowned slots.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Largest ring keepon accepts.
pub const MAX_RING_SLOTS: u32 = 4096;

/// Index of a traffic class (its position in the configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassId(pub u8);

/// Most classes per station.
pub const MAX_CLASSES: usize = 64;

/// Errors in slot ownership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsolationError {
    /// Ring size outside `2..=4096`.
    BadRingSize(u32),
    /// A mask string that is not hexadecimal.
    BadMask {
        /// Class name.
        class: String,
        /// Offending text.
        text: String,
    },
    /// A slot index at or beyond the ring size.
    SlotOutOfRing {
        /// Class name.
        class: String,
        /// Offending slot.
        slot: u32,
        /// Ring size.
        ring: u32,
    },
    /// Two classes claim the same slot.
    Overlap {
        /// First owner.
        first: String,
        /// Second owner.
        second: String,
        /// The shared ring slot.
        slot: u32,
    },
    /// More than [`MAX_CLASSES`] classes, or none.
    ClassCount(usize),
    /// Two classes with one name.
    DuplicateName(String),
}

impl fmt::Display for IsolationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsolationError::BadRingSize(n) => {
                write!(f, "ring size {n} is outside 2..={MAX_RING_SLOTS}")
            }
            IsolationError::BadMask { class, text } => {
                write!(f, "class `{class}`: slot mask `{text}` is not a hex number like 0x20002")
            }
            IsolationError::SlotOutOfRing { class, slot, ring } => {
                write!(f, "class `{class}`: slot {slot} is outside the ring of {ring} slots (0..={})", ring - 1)
            }
            IsolationError::Overlap { first, second, slot } => {
                write!(f, "classes `{first}` and `{second}` both own ring slot {slot}; slot masks must be disjoint")
            }
            IsolationError::ClassCount(n) => write!(f, "{n} classes; keepon supports 1..={MAX_CLASSES}"),
            IsolationError::DuplicateName(n) => write!(f, "class name `{n}` is used twice"),
        }
    }
}

/// Parse a hex slot mask (`0x20002`, bit `i` = ring slot `i`) into sorted slot indices.
pub fn parse_mask(class: &str, text: &str, ring: u32) -> Result<Vec<u32>, IsolationError> {
    let bad = || IsolationError::BadMask { class: class.into(), text: text.into() };
    let digits = text.trim();
    let digits = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")).unwrap_or(digits);
    let digits: String = digits.chars().filter(|c| *c != '_').collect();
    if digits.is_empty() {
        return Err(bad());
    }
    let mut slots = Vec::new();
    for (pos, ch) in digits.chars().rev().enumerate() {
        let nibble = ch.to_digit(16).ok_or_else(bad)?;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                let slot = u32::try_from(pos * 4 + bit).map_err(|_| bad())?;
                if slot >= ring {
                    return Err(IsolationError::SlotOutOfRing { class: class.into(), slot, ring });
                }
                slots.push(slot);
            }
        }
    }
    Ok(slots)
}

/// Render slot indices as a hex mask.
pub fn format_mask(slots: &[u32]) -> String {
    let top = slots.iter().copied().max().map_or(0, |m| m as usize / 4 + 1);
    let mut nibbles = vec![0u8; top.max(1)];
    for &s in slots {
        nibbles[s as usize / 4] |= 1 << (s % 4);
    }
    let mut out = String::from("0x");
    let mut leading = true;
    for (i, n) in nibbles.iter().enumerate().rev() {
        if leading && *n == 0 && i != 0 {
            continue;
        }
        leading = false;
        out.push(char::from_digit(u32::from(*n), 16).unwrap_or('?'));
    }
    out
}

/// One class as configured: a name and its ring slots (empty = best effort).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSpec {
    /// Name, unique.
    pub name: String,
    /// Owned ring slots.
    pub slots: Vec<u32>,
}

/// The validated ownership map of a ring.
#[derive(Clone, Debug)]
pub struct Ownership {
    ring: u32,
    /// `ring − 1` for a power-of-two ring (a slot's ring slot is then a mask, not a 64-bit division), else 0.
    mask: u64,
    owner: Vec<Option<ClassId>>,
    names: Vec<String>,
    /// Per class, its owned ring slots, sorted.
    owned: Vec<Vec<u32>>,
    /// Ring slots no class owns, sorted.
    unowned: Vec<u32>,
}

impl Ownership {
    /// Validate class specs against a ring of `ring` slots: slots inside the ring, disjoint, names unique.
    pub fn new(ring: u32, classes: &[ClassSpec]) -> Result<Self, IsolationError> {
        if !(2..=MAX_RING_SLOTS).contains(&ring) {
            return Err(IsolationError::BadRingSize(ring));
        }
        if classes.is_empty() || classes.len() > MAX_CLASSES {
            return Err(IsolationError::ClassCount(classes.len()));
        }
        let mut owner: Vec<Option<ClassId>> = vec![None; ring as usize];
        let mut owned = Vec::with_capacity(classes.len());
        for (i, c) in classes.iter().enumerate() {
            if classes[..i].iter().any(|o| o.name == c.name) {
                return Err(IsolationError::DuplicateName(c.name.clone()));
            }
            let id = ClassId(i as u8);
            let mut mine = c.slots.clone();
            mine.sort_unstable();
            mine.dedup();
            for &s in &mine {
                if s >= ring {
                    return Err(IsolationError::SlotOutOfRing { class: c.name.clone(), slot: s, ring });
                }
                if let Some(prev) = owner[s as usize] {
                    return Err(IsolationError::Overlap {
                        first: classes[prev.0 as usize].name.clone(),
                        second: c.name.clone(),
                        slot: s,
                    });
                }
                owner[s as usize] = Some(id);
            }
            owned.push(mine);
        }
        let unowned = (0..ring).filter(|&s| owner[s as usize].is_none()).collect();
        let mask = if ring.is_power_of_two() { u64::from(ring) - 1 } else { 0 };
        Ok(Ownership { ring, mask, owner, names: classes.iter().map(|c| c.name.clone()).collect(), owned, unowned })
    }

    /// Ring size `N`.
    pub fn ring(&self) -> u32 {
        self.ring
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.names.len()
    }

    /// Name of a class.
    pub fn name(&self, c: ClassId) -> &str {
        self.names.get(c.0 as usize).map_or("?", |s| s.as_str())
    }

    /// Look a class up by name.
    pub fn class_named(&self, name: &str) -> Option<ClassId> {
        self.names.iter().position(|n| n == name).map(|i| ClassId(i as u8))
    }

    /// True if the class exists.
    pub fn has_class(&self, c: ClassId) -> bool {
        (c.0 as usize) < self.names.len()
    }

    /// Owner of absolute slot `k` (`None` = best effort).
    #[inline]
    pub fn owner_of(&self, k: u64) -> Option<ClassId> {
        self.owner[self.ring_slot(k) as usize]
    }

    /// The ring slot of absolute slot `k`.
    #[inline]
    pub fn ring_slot(&self, k: u64) -> u32 {
        if self.mask != 0 {
            (k & self.mask) as u32
        } else {
            (k % u64::from(self.ring)) as u32
        }
    }

    /// True if the class owns no slot (best effort).
    pub fn is_best_effort(&self, c: ClassId) -> bool {
        self.owned.get(c.0 as usize).is_none_or(|s| s.is_empty())
    }

    /// Ring slots a class owns.
    pub fn owned(&self, c: ClassId) -> &[u32] {
        self.owned.get(c.0 as usize).map_or(&[], |v| v.as_slice())
    }

    /// Ring slots nobody owns.
    pub fn unowned(&self) -> &[u32] {
        &self.unowned
    }

    /// The first absolute slot `≥ k` whose ring slot is in `set` (sorted, non-empty), or `None` if `set` is
    /// empty.
    pub fn next_in(&self, set: &[u32], k: u64) -> Option<u64> {
        let n = u64::from(self.ring);
        let first = *set.first()?;
        let r = self.ring_slot(k);
        let base = k - u64::from(r);
        let i = set.partition_point(|&s| s < r);
        Some(match set.get(i) {
            Some(&s) => base + u64::from(s),
            None => base + n + u64::from(first),
        })
    }

    /// The first absolute slot `≥ k` that class `c` owns (best-effort classes: the first unowned slot).
    pub fn next_usable(&self, c: ClassId, k: u64) -> Option<u64> {
        if self.is_best_effort(c) {
            self.next_in(&self.unowned, k)
        } else {
            self.next_in(self.owned(c), k)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, slots: &[u32]) -> ClassSpec {
        ClassSpec { name: name.into(), slots: slots.to_vec() }
    }

    #[test]
    fn prototype_masks_parse() {
        assert_eq!(parse_mask("tc-0", "0x01", 32).unwrap(), vec![0]);
        assert_eq!(parse_mask("tc-1", "0x20002", 32).unwrap(), vec![1, 17]);
        assert_eq!(parse_mask("tc-0", "0xffffffff", 32).unwrap(), (0..32).collect::<Vec<_>>());
        assert_eq!(parse_mask("x", "0", 32).unwrap(), Vec::<u32>::new());
        assert_eq!(format_mask(&[1, 17]), "0x20002");
        assert_eq!(format_mask(&[]), "0x0");
    }

    #[test]
    fn bad_masks_name_the_problem() {
        assert!(matches!(parse_mask("a", "0xZZ", 32), Err(IsolationError::BadMask { .. })));
        assert_eq!(
            parse_mask("a", "0x100000000", 32),
            Err(IsolationError::SlotOutOfRing { class: "a".into(), slot: 32, ring: 32 })
        );
        let e = Ownership::new(32, &[spec("a", &[1, 2]), spec("b", &[2])]).unwrap_err();
        assert_eq!(e, IsolationError::Overlap { first: "a".into(), second: "b".into(), slot: 2 });
        assert!(e.to_string().contains("both own ring slot 2"));
        assert!(Ownership::new(1, &[spec("a", &[])]).is_err());
        assert!(matches!(Ownership::new(8, &[spec("a", &[]), spec("a", &[1])]), Err(IsolationError::DuplicateName(_))));
    }

    #[test]
    fn next_usable_wraps_the_ring() {
        let o = Ownership::new(32, &[spec("tc-0", &[0]), spec("tc-1", &[1, 17]), spec("be", &[])]).unwrap();
        let (c0, c1, be) = (ClassId(0), ClassId(1), ClassId(2));
        assert_eq!(o.next_usable(c0, 0), Some(0));
        assert_eq!(o.next_usable(c0, 1), Some(32));
        assert_eq!(o.next_usable(c1, 2), Some(17));
        assert_eq!(o.next_usable(c1, 18), Some(33));
        assert_eq!(o.next_usable(be, 0), Some(2));
        assert_eq!(o.next_usable(be, 16), Some(16));
        assert_eq!(o.next_usable(be, 17), Some(18));
        assert!(o.is_best_effort(be));
        assert_eq!(o.owner_of(49), Some(c1));
    }
}
