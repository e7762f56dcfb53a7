//! A slab whose entries sit on up to `L` intrusive doubly linked lists at once.
//!
//! Matching needs removal from the middle of ordered lists (a message taken through its exact
//! bucket must also leave the arrival-order lists; a cancelled receive leaves its bucket) in
//! O(1) and without allocating per operation. Keys are slot indices, reused after removal;
//! callers that hand keys out pair them with a sequence number to detect stale ones.

use std::mem;

const NIL: u32 = u32::MAX;

/// Once empty, the slab gives back memory beyond this many slots, so a burst of unexpected
/// messages does not pin its high-water mark forever.
const KEEP_SLOTS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    prev: u32,
    next: u32,
}

impl Link {
    const NONE: Link = Link {
        prev: NIL,
        next: NIL,
    };
}

/// The head of one list; it lives wherever the caller keeps it (a map value, a field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for List {
    fn default() -> List {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl List {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn first(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
}

#[derive(Debug)]
enum Slot<T, const L: usize> {
    Used { value: T, links: [Link; L] },
    Free { next: u32 },
}

#[derive(Debug)]
pub(super) struct Arena<T, const L: usize> {
    slots: Vec<Slot<T, L>>,
    free: u32,
    len: usize,
}

impl<T, const L: usize> Default for Arena<T, L> {
    fn default() -> Self {
        Arena {
            slots: Vec::new(),
            free: NIL,
            len: 0,
        }
    }
}

impl<T, const L: usize> Arena<T, L> {
    /// What one entry costs, for the memory account.
    pub(super) const SLOT_BYTES: usize = mem::size_of::<Slot<T, L>>();

    /// Bytes of slots allocated, used or free.
    pub(super) fn capacity_bytes(&self) -> usize {
        self.slots.capacity() * Self::SLOT_BYTES
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Stores `value`, on no list yet.
    pub(super) fn insert(&mut self, value: T) -> u32 {
        let slot = Slot::Used {
            value,
            links: [Link::NONE; L],
        };
        self.len += 1;
        if self.free != NIL {
            let key = self.free;
            match mem::replace(&mut self.slots[key as usize], slot) {
                Slot::Free { next } => self.free = next,
                Slot::Used { .. } => unreachable!("free list points at a used slot"),
            }
            key
        } else {
            let key = u32::try_from(self.slots.len())
                .ok()
                .filter(|&k| k != NIL)
                .expect("more than 2^32-1 queued entries");
            self.slots.push(slot);
            key
        }
    }

    /// Removes an entry the caller has already unlinked from every list.
    pub(super) fn remove(&mut self, key: u32) -> T {
        let freed = Slot::Free { next: self.free };
        let Slot::Used { value, .. } = mem::replace(&mut self.slots[key as usize], freed) else {
            panic!("arena key {key} is not in use");
        };
        self.free = key;
        self.len -= 1;
        if self.len == 0 {
            self.slots.clear();
            self.slots.shrink_to(KEEP_SLOTS);
            self.free = NIL;
        }
        value
    }

    pub(super) fn get(&self, key: u32) -> Option<&T> {
        match self.slots.get(key as usize) {
            Some(Slot::Used { value, .. }) => Some(value),
            _ => None,
        }
    }

    pub(super) fn get_mut(&mut self, key: u32) -> Option<&mut T> {
        match self.slots.get_mut(key as usize) {
            Some(Slot::Used { value, .. }) => Some(value),
            _ => None,
        }
    }

    /// An entry the caller knows to be live.
    pub(super) fn at(&self, key: u32) -> &T {
        self.get(key).expect("stale arena key")
    }

    pub(super) fn at_mut(&mut self, key: u32) -> &mut T {
        self.get_mut(key).expect("stale arena key")
    }

    /// Every live entry, in slot order (not list order).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots.iter().enumerate().filter_map(|(k, s)| match s {
            Slot::Used { value, .. } => Some((k as u32, value)),
            Slot::Free { .. } => None,
        })
    }

    fn links_mut(&mut self, key: u32) -> &mut [Link; L] {
        match &mut self.slots[key as usize] {
            Slot::Used { links, .. } => links,
            Slot::Free { .. } => panic!("arena key {key} is not in use"),
        }
    }

    /// Appends `key` to `list`, threaded through link `l`.
    pub(super) fn push_back(&mut self, list: &mut List, l: usize, key: u32) {
        let tail = list.tail;
        self.links_mut(key)[l] = Link {
            prev: tail,
            next: NIL,
        };
        if tail == NIL {
            list.head = key;
        } else {
            self.links_mut(tail)[l].next = key;
        }
        list.tail = key;
        list.len += 1;
    }

    /// Takes `key` out of `list`, which must be the list it is on through link `l`.
    pub(super) fn unlink(&mut self, list: &mut List, l: usize, key: u32) {
        let Link { prev, next } = mem::replace(&mut self.links_mut(key)[l], Link::NONE);
        if prev == NIL {
            debug_assert_eq!(list.head, key, "unlinking from the wrong list");
            list.head = next;
        } else {
            self.links_mut(prev)[l].next = next;
        }
        if next == NIL {
            debug_assert_eq!(list.tail, key, "unlinking from the wrong list");
            list.tail = prev;
        } else {
            self.links_mut(next)[l].prev = prev;
        }
        list.len -= 1;
    }

    /// The entries of `list`, front to back.
    pub(super) fn iter_list<'a>(
        &'a self,
        list: &List,
        l: usize,
    ) -> impl Iterator<Item = (u32, &'a T)> + 'a {
        let mut cur = list.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let key = cur;
            match &self.slots[key as usize] {
                Slot::Used { value, links } => {
                    cur = links[l].next;
                    Some((key, value))
                }
                Slot::Free { .. } => panic!("list reaches a free slot"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(a: &Arena<char, 2>, list: &List, l: usize) -> String {
        a.iter_list(list, l).map(|(_, c)| *c).collect()
    }

    #[test]
    fn two_lists_through_the_same_entries() {
        let mut a = Arena::<char, 2>::default();
        let (mut all, mut odd) = (List::default(), List::default());
        let keys: Vec<u32> = "abcde".chars().map(|c| a.insert(c)).collect();
        for (i, &k) in keys.iter().enumerate() {
            a.push_back(&mut all, 0, k);
            if i % 2 == 0 {
                a.push_back(&mut odd, 1, k);
            }
        }
        assert_eq!(
            (items(&a, &all, 0), items(&a, &odd, 1)),
            ("abcde".into(), "ace".into())
        );
        // Middle, head and tail removals keep both lists consistent.
        for k in [keys[2], keys[0], keys[4]] {
            a.unlink(&mut all, 0, k);
            a.unlink(&mut odd, 1, k);
            a.remove(k);
        }
        assert_eq!(
            (items(&a, &all, 0), items(&a, &odd, 1)),
            ("bd".into(), "".into())
        );
        assert_eq!((all.len(), odd.len(), odd.first()), (2, 0, None));
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn keys_are_reused_and_empty_arena_shrinks() {
        let mut a = Arena::<u64, 1>::default();
        let keys: Vec<u32> = (0..1000).map(|v| a.insert(v)).collect();
        a.remove(keys[10]);
        assert_eq!(a.insert(7), keys[10]);
        assert_eq!(a.get(keys[10]), Some(&7));
        for &k in &keys {
            a.remove(k);
        }
        assert_eq!(a.len(), 0);
        assert!(a.slots.capacity() <= KEEP_SLOTS);
        assert_eq!(a.get(keys[3]), None);
        assert_eq!(a.insert(1), 0);
    }
}
