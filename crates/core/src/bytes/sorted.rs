//! The byte clock's waiting real-time frames, ordered by key: a ring buffer kept sorted. Frames mostly arrive in
//! key order and leave from the front, so the usual insert is a push at the back and the usual removal a pop at
//! the front, each O(1) with no allocation once the buffer has grown (a `BTreeMap` paid ~700 instructions a frame
//! for the two); lookups are binary searches. The few frames that arrive out of order are moved into place.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Values ordered by a unique key.
#[derive(Debug)]
pub(super) struct Sorted<K, V> {
    items: VecDeque<(K, V)>,
}

impl<K, V> Default for Sorted<K, V> {
    fn default() -> Self {
        Sorted { items: VecDeque::new() }
    }
}

impl<K: Ord + Copy, V> Sorted<K, V> {
    /// Where `k` is, or would go.
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.items.binary_search_by(|(x, _)| x.cmp(k))
    }

    /// Insert `v` at `k` (replacing what was there, which is returned).
    pub(super) fn insert(&mut self, k: K, v: V) -> Option<V> {
        if self.items.back().is_none_or(|(last, _)| *last < k) {
            self.items.push_back((k, v));
            return None;
        }
        match self.find(&k) {
            Ok(i) => Some(core::mem::replace(&mut self.items[i].1, v)),
            Err(i) => {
                self.items.insert(i, (k, v));
                None
            }
        }
    }

    /// How many wait.
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The first key.
    pub(super) fn first_key(&self) -> Option<K> {
        self.items.front().map(|(k, _)| *k)
    }

    /// The value at `k`.
    pub(super) fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.items[i].1)
    }

    /// The value at `k`, to change.
    pub(super) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.find(k).ok().map(|i| &mut self.items[i].1)
    }

    /// Take the value at `k` out.
    pub(super) fn remove(&mut self, k: &K) -> Option<V> {
        if self.items.front().is_some_and(|(x, _)| x == k) {
            return self.items.pop_front().map(|(_, v)| v);
        }
        let i = self.find(k).ok()?;
        self.items.remove(i).map(|(_, v)| v)
    }

    /// The last entry with a key below `k`.
    pub(super) fn last_below(&self, k: &K) -> Option<(&K, &V)> {
        let i = self.items.partition_point(|(x, _)| x < k);
        i.checked_sub(1).map(|i| (&self.items[i].0, &self.items[i].1))
    }

    /// The first entry with a key above `k`.
    pub(super) fn first_above(&self, k: &K) -> Option<(&K, &V)> {
        let i = self.items.partition_point(|(x, _)| x <= k);
        self.items.get(i).map(|(x, v)| (x, v))
    }

    /// The keys at or above `k`, in order.
    pub(super) fn keys_from(&self, k: &K) -> Vec<K> {
        let i = self.items.partition_point(|(x, _)| x < k);
        self.items.range(i..).map(|(x, _)| *x).collect()
    }

    /// Take every value out, in key order.
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = V> {
        core::mem::take(&mut self.items).into_iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of inserts (in order or not), removals and lookups answers as a `BTreeMap` does.
        #[test]
        fn it_answers_as_an_ordered_map(ops in proptest::collection::vec((0u8..6, 0u16..200, 0u32..1000), 1..400)) {
            let mut s: Sorted<u16, u32> = Sorted::default();
            let mut m: BTreeMap<u16, u32> = BTreeMap::new();
            let mut next = 0u16;
            for (op, k, v) in ops {
                match op {
                    // Mostly in order, as frames come.
                    0 | 1 => {
                        next = next.wrapping_add(k % 7);
                        prop_assert_eq!(s.insert(next, v), m.insert(next, v));
                    }
                    2 => prop_assert_eq!(s.insert(k, v), m.insert(k, v)),
                    3 => {
                        let first = m.keys().next().copied();
                        prop_assert_eq!(s.first_key(), first);
                        if let Some(f) = first {
                            prop_assert_eq!(s.remove(&f), m.remove(&f));
                        }
                    }
                    4 => prop_assert_eq!(s.remove(&k), m.remove(&k)),
                    _ => {
                        prop_assert_eq!(s.get(&k), m.get(&k));
                        prop_assert_eq!(s.last_below(&k), m.range(..k).next_back());
                        prop_assert_eq!(s.first_above(&k), m.range(k + 1..).next());
                        prop_assert_eq!(s.keys_from(&k), m.range(k..).map(|(x, _)| *x).collect::<Vec<_>>());
                        if let Some(x) = s.get_mut(&k) {
                            *x += 1;
                            *m.get_mut(&k).unwrap() += 1;
                        }
                    }
                }
                prop_assert_eq!(s.len(), m.len());
            }
            prop_assert_eq!(s.take_all().collect::<Vec<_>>(), m.into_values().collect::<Vec<_>>());
        }
    }
}
