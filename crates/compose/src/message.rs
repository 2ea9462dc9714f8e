//! Messages: immutable, shared batches that travel between blocks without being copied.
//!
//! A [`Msg`] is a reference-counted handle to a payload. Fan-out to several blocks clones the
//! handle (one atomic increment), never the payload. Memory is recycled by a [`Pool`] that the
//! sending block owns: a payload whose every handle has been dropped is filled again in place,
//! so a steady stream of messages costs no allocation.
use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

/// What a message carries. `items` is what the per-block counters add up (packets in a packet
/// batch, records in a flow batch); a payload that is one thing returns 1.
pub trait Payload: Any + Send + Sync {
    /// Number of items in this message, for the counters.
    fn items(&self) -> usize {
        1
    }
}

/// The type of the messages a gate carries, checked when a composition is validated: two gates
/// connect only when their types are equal (or the input accepts any type).
#[derive(Clone, Copy)]
pub struct MsgType {
    /// Short name shown in errors and docs (`packets`, `flows`, `series`, `alarms`, ...).
    pub name: &'static str,
    id: Option<fn() -> TypeId>,
}

impl MsgType {
    /// The type of gates carrying `T`, shown as `name`.
    pub const fn of<T: Payload>(name: &'static str) -> MsgType {
        MsgType {
            name,
            id: Some(TypeId::of::<T>),
        }
    }

    /// An input gate that takes messages of every type (counters, sinks that only count).
    pub const ANY: MsgType = MsgType {
        name: "any",
        id: None,
    };

    /// Whether an output of type `self` may feed an input of type `input`.
    pub fn feeds(&self, input: &MsgType) -> bool {
        match (self.id, input.id) {
            (_, None) => true,
            (Some(a), Some(b)) => a() == b(),
            (None, Some(_)) => false,
        }
    }
}

impl fmt::Debug for MsgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// A message: a shared, read-only handle to a payload.
#[derive(Clone)]
pub struct Msg(Arc<dyn Payload>);

impl Msg {
    /// Wraps a payload that is not pooled (one-off messages, tests). Allocates.
    pub fn new<T: Payload>(payload: T) -> Msg {
        Msg(Arc::new(payload))
    }

    /// The payload as `T`, or `None` when the message carries another type.
    #[inline]
    pub fn get<T: Payload>(&self) -> Option<&T> {
        let any: &dyn Any = &*self.0;
        any.downcast_ref::<T>()
    }

    /// Number of items, for counters.
    #[inline]
    pub fn items(&self) -> usize {
        self.0.items()
    }

    /// How many handles to this payload exist (queues and blocks holding it).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl fmt::Debug for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Msg({} items)", self.items())
    }
}

/// Recycles payloads of one type for one sender.
///
/// The pool keeps a handle to every payload it ever handed out. [`Pool::take`] returns one
/// that nobody else holds any more (every receiver has dropped it), reset by the caller, or a
/// new one when all are still in flight. The pool is owned by one block, so taking needs no
/// lock; "nobody else holds it" is `Arc::get_mut`'s uniqueness check, which also orders the
/// receivers' last reads before the sender's next writes.
pub struct Pool<T: Payload> {
    slots: Vec<Arc<T>>,
    next: usize,
    /// Where [`Pool::release_some`] looks next.
    release_at: usize,
    make: fn() -> T,
    allocated: u64,
}

impl<T: Payload> Pool<T> {
    /// An empty pool whose payloads are made by `make` when needed.
    pub fn new(make: fn() -> T) -> Pool<T> {
        Pool {
            slots: Vec::new(),
            next: 0,
            release_at: 0,
            make,
            allocated: 0,
        }
    }

    /// A payload to fill: a recycled one when any is free (its old contents still there, for
    /// the caller to clear while keeping capacity), else a new one.
    pub fn take(&mut self) -> PoolSlot<'_, T> {
        let n = self.slots.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            if Arc::get_mut(&mut self.slots[at]).is_some() {
                self.next = (at + 1) % n;
                return PoolSlot {
                    slot: &mut self.slots[at],
                };
            }
        }
        self.slots.push(Arc::new((self.make)()));
        self.allocated += 1;
        self.next = 0;
        PoolSlot {
            slot: self.slots.last_mut().expect("just pushed"),
        }
    }

    /// Payloads allocated over the pool's life (stays flat once the pool is warm).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Calls `f` on every payload nobody else holds any more: to let go of what a spent
    /// payload still refers to (a source's buffer, say) before it is filled again. Visits
    /// every slot, so call it now and then, not per message.
    pub fn for_each_unheld(&mut self, mut f: impl FnMut(&mut T)) {
        for slot in &mut self.slots {
            if let Some(p) = Arc::get_mut(slot) {
                f(p);
            }
        }
    }

    /// [`Pool::for_each_unheld`] a few slots at a time: visits the next `RELEASE_STEP`
    /// slots round the pool, at a cost per call that does not grow with the pool, so a
    /// sender may call it per message. A pool grows as deep as its messages in flight (a
    /// thousand batches queued for slower receivers), and a whole visit per message was then
    /// the sender's largest cost: each slot's check is an atomic read-modify-write of a
    /// counter the receivers' threads write (bench/RESULTS.md, issue 26). A payload spent now
    /// is visited within `len / RELEASE_STEP` calls.
    pub fn release_some(&mut self, mut f: impl FnMut(&mut T)) {
        let n = self.slots.len();
        for _ in 0..RELEASE_STEP.min(n) {
            self.release_at = (self.release_at + 1) % n;
            if let Some(p) = Arc::get_mut(&mut self.slots[self.release_at]) {
                f(p);
            }
        }
    }
}

/// Slots [`Pool::release_some`] visits per call.
const RELEASE_STEP: usize = 4;

/// A payload taken from a [`Pool`], writable until it is sent.
pub struct PoolSlot<'a, T: Payload> {
    slot: &'a mut Arc<T>,
}

impl<T: Payload> PoolSlot<'_, T> {
    /// The payload, to fill.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        Arc::get_mut(self.slot).expect("a pool slot is unique until sent")
    }

    /// Turns the filled payload into a message; the pool keeps a handle to recycle it.
    #[inline]
    pub fn into_msg(self) -> Msg {
        Msg(self.slot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Numbers(Vec<u32>);
    impl Payload for Numbers {
        fn items(&self) -> usize {
            self.0.len()
        }
    }
    struct Other;
    impl Payload for Other {}

    #[test]
    fn types_feed_only_their_own_kind_or_any() {
        let numbers = MsgType::of::<Numbers>("numbers");
        let other = MsgType::of::<Other>("other");
        assert!(numbers.feeds(&numbers));
        assert!(!numbers.feeds(&other));
        assert!(numbers.feeds(&MsgType::ANY));
        assert!(!MsgType::ANY.feeds(&numbers));
    }

    #[test]
    fn downcast_finds_the_payload_type() {
        let m = Msg::new(Numbers(vec![1, 2, 3]));
        assert_eq!(m.get::<Numbers>().map(|n| n.0.len()), Some(3));
        assert!(m.get::<Other>().is_none());
        assert_eq!(m.items(), 3);
    }

    #[test]
    fn pool_recycles_only_payloads_nobody_holds() {
        let mut pool = Pool::new(Numbers::default);
        let mut s = pool.take();
        s.get_mut().0.extend([1, 2]);
        let first = s.into_msg();
        // Still held: a second take must not hand out the same payload.
        let mut s = pool.take();
        assert!(s.get_mut().0.is_empty());
        let second = s.into_msg();
        assert_eq!(pool.allocated(), 2);
        let seen_by_receiver = first.clone();
        drop(first);
        drop(second);
        // `first` is still held by a receiver, `second` is free.
        assert!(
            pool.take().get_mut().0.is_empty(),
            "got the payload a receiver still holds"
        );
        drop(seen_by_receiver);
        for _ in 0..10 {
            let mut s = pool.take();
            s.get_mut().0.clear();
            drop(s.into_msg());
        }
        assert_eq!(pool.allocated(), 2, "a warm pool allocates no more");
    }

    #[test]
    fn release_some_visits_every_unheld_payload_within_a_round() {
        let mut pool = Pool::new(Numbers::default);
        // Ten payloads, the third held by a receiver, the rest spent.
        let msgs: Vec<Msg> = (0..10)
            .map(|i| {
                let mut s = pool.take();
                s.get_mut().0.push(i);
                s.into_msg()
            })
            .collect();
        let held = msgs[2].clone();
        drop(msgs);
        let mut released = Vec::new();
        for _ in 0..10usize.div_ceil(RELEASE_STEP) {
            pool.release_some(|n| released.append(&mut n.0));
        }
        released.sort();
        assert_eq!(
            released,
            [0, 1, 3, 4, 5, 6, 7, 8, 9],
            "the held payload is never touched"
        );
        assert_eq!(held.get::<Numbers>().unwrap().0, vec![2]);
    }

    #[test]
    fn for_each_unheld_visits_only_payloads_nobody_holds() {
        let mut pool = Pool::new(Numbers::default);
        let mut s = pool.take();
        s.get_mut().0.push(1);
        let held = s.into_msg();
        let mut s = pool.take();
        s.get_mut().0.push(2);
        drop(s.into_msg());
        pool.for_each_unheld(|n| n.0.clear());
        assert_eq!(
            held.get::<Numbers>().unwrap().0,
            vec![1],
            "a held payload was touched"
        );
        drop(held);
        let mut seen = 0;
        pool.for_each_unheld(|n| {
            seen += 1;
            assert!(n.0.is_empty() || n.0 == vec![1]);
        });
        assert_eq!(seen, 2);
    }
}
