//! The bounded queue between a device feed's thread and the training loop, refilled in
//! bursts.
//!
//! A plain bounded channel wakes its blocked sender on every receive. When the feed is
//! ahead (its queue full), each training step's receive then wakes the feed's thread,
//! which, on a machine whose cores libtorch keeps busy, takes the training thread's core
//! at once and pulls the next batch through the pipeline's hand-offs before the step
//! can start: 0.13–0.55 ms of every ~6 ms step of the digits job on 2 cores, with 7
//! batches queued (BENCHMARKS.md, "[6/7] V: the main job's data stall"). Here the full
//! sender sleeps until the queue has drained to its low-water mark, then refills it in
//! one burst: one wake-up per several batches instead of one per batch.
//!
//! The queue holds at most `capacity` items, and past its first [`MIN_AHEAD`] items at
//! most `max_bytes` (each item's size is given with it). The sender resumes once the
//! queue holds at most half of each, or a single item: it is never left to refill an
//! empty queue while the receiver waits. The receiver is woken when an item arrives in
//! an empty queue, or when the sender is gone.
//!
//! Dropping the [`Receiver`] closes the queue: a blocked or later `send` fails, as with
//! `std::sync::mpsc`, and the queued items are dropped. Dropping the [`Sender`] lets the
//! receiver drain what is queued, then `recv` gives `None`.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Items the queue holds whatever their size (as the 2-deep channel it replaced did).
pub(crate) const MIN_AHEAD: usize = 2;

struct State<T> {
    queue: VecDeque<(T, usize)>,
    bytes: usize,
    /// The sender sleeps until the queue drains to its low-water mark.
    sender_waiting: bool,
    /// The receiver sleeps until an item arrives or the sender is gone.
    receiver_waiting: bool,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// The sender waits on it for room.
    room: Condvar,
    /// The receiver waits on it for an item.
    items: Condvar,
    capacity: usize,
    max_bytes: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Neither side panics while holding the lock; a poisoned state is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn full(&self, state: &State<T>) -> bool {
        let len = state.queue.len();
        len >= self.capacity || (len >= MIN_AHEAD && state.bytes >= self.max_bytes)
    }

    fn low(&self, state: &State<T>) -> bool {
        let len = state.queue.len();
        len <= 1 || (len <= self.capacity / 2 && state.bytes <= self.max_bytes / 2)
    }
}

/// The sending half: see the [module docs](self).
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving half: see the [module docs](self).
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("capacity", &self.shared.capacity)
            .field("max_bytes", &self.shared.max_bytes)
            .finish()
    }
}

/// A queue of at most `capacity` items (at least [`MIN_AHEAD`]) and, past its first
/// [`MIN_AHEAD`], `max_bytes`.
pub(crate) fn queue<T>(capacity: usize, max_bytes: usize) -> (Sender<T>, Receiver<T>) {
    let capacity = capacity.max(MIN_AHEAD);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::with_capacity(capacity),
            bytes: 0,
            sender_waiting: false,
            receiver_waiting: false,
            sender_gone: false,
            receiver_gone: false,
        }),
        room: Condvar::new(),
        items: Condvar::new(),
        capacity,
        max_bytes,
    });
    (Sender { shared: shared.clone() }, Receiver { shared })
}

impl<T> Sender<T> {
    /// Queues `item` of `bytes` bytes, waiting while the queue is full; gives it back if
    /// the receiver is gone.
    pub(crate) fn send(&self, item: T, bytes: usize) -> Result<(), T> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        while shared.full(&state) && !state.receiver_gone {
            state.sender_waiting = true;
            state = shared.room.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if state.receiver_gone {
            return Err(item);
        }
        state.queue.push_back((item, bytes));
        state.bytes += bytes;
        if state.receiver_waiting {
            state.receiver_waiting = false;
            shared.items.notify_one();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.sender_gone = true;
        self.shared.items.notify_one();
    }
}

impl<T> Receiver<T> {
    /// Whether the sender is gone: nothing more will be queued (what is queued is still
    /// there to receive).
    pub(crate) fn sender_gone(&self) -> bool {
        self.shared.lock().sender_gone
    }

    /// The next item, waiting for one; `None` once the sender is gone and the queue empty.
    pub(crate) fn recv(&self) -> Option<T> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            if let Some((item, bytes)) = state.queue.pop_front() {
                state.bytes -= bytes;
                if state.sender_waiting && shared.low(&state) {
                    state.sender_waiting = false;
                    shared.room.notify_one();
                }
                return Some(item);
            }
            if state.sender_gone {
                return None;
            }
            state.receiver_waiting = true;
            state = shared.items.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let queued = {
            let mut state = self.shared.lock();
            state.receiver_gone = true;
            self.shared.room.notify_one();
            std::mem::take(&mut state.queue)
        };
        // The queued items (tensors) are freed outside the lock.
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn delivers_every_item_in_order_then_none() {
        let (tx, rx) = queue(4, usize::MAX);
        let t = std::thread::spawn(move || {
            for i in 0..1000 {
                tx.send(i, 1).unwrap();
            }
        });
        let got: Vec<i32> = std::iter::from_fn(|| rx.recv()).collect();
        t.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert_eq!(rx.recv(), None);
    }

    #[test]
    fn says_the_sender_is_gone_while_its_items_are_still_queued() {
        let (tx, rx) = queue(4, usize::MAX);
        tx.send(1, 1).unwrap();
        tx.send(2, 1).unwrap();
        assert!(!rx.sender_gone());
        assert_eq!(rx.recv(), Some(1));
        drop(tx);
        assert!(rx.sender_gone(), "gone, with an item still queued");
        assert_eq!(rx.recv(), Some(2));
        assert_eq!(rx.recv(), None);
        assert!(rx.sender_gone());
    }

    /// A sender of `n` items of `bytes` each, counting what it has queued.
    fn sender(n: usize, bytes: usize, capacity: usize, max: usize) -> (Receiver<usize>, Arc<AtomicUsize>) {
        let sent = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = queue(capacity, max);
        let counter = sent.clone();
        std::thread::spawn(move || {
            for i in 0..n {
                if tx.send(i, bytes).is_err() {
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        (rx, sent)
    }

    /// Waits until `sent` reaches `n`, then a while longer to see it stay there.
    fn settles_at(sent: &AtomicUsize, n: usize) -> usize {
        while sent.load(Ordering::SeqCst) < n {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(30));
        sent.load(Ordering::SeqCst)
    }

    #[test]
    fn holds_at_most_its_capacity_and_resumes_at_half() {
        let (rx, sent) = sender(10, 1, 4, usize::MAX);
        assert_eq!(settles_at(&sent, 4), 4, "a full queue holds its capacity");
        // One receive leaves 3, above the low-water mark (2): the sender stays asleep.
        assert_eq!(rx.recv(), Some(0));
        assert_eq!(settles_at(&sent, 4), 4, "the sender waits for the low-water mark");
        // The second leaves 2: the sender refills in one go.
        assert_eq!(rx.recv(), Some(1));
        assert_eq!(settles_at(&sent, 6), 6);
        let rest: Vec<usize> = std::iter::from_fn(|| rx.recv()).collect();
        assert_eq!(rest, (2..10).collect::<Vec<_>>());
    }

    #[test]
    fn large_items_are_held_two_deep_and_resume_at_one() {
        // 10 bytes each, at most 15 past the first two: two items, as the old channel.
        let (rx, sent) = sender(6, 10, 8, 15);
        assert_eq!(settles_at(&sent, 2), 2, "two items whatever their size");
        assert_eq!(rx.recv(), Some(0));
        assert_eq!(settles_at(&sent, 3), 3, "one left: the sender refills");
        let rest: Vec<usize> = std::iter::from_fn(|| rx.recv()).collect();
        assert_eq!(rest, (1..6).collect::<Vec<_>>());
    }

    #[test]
    fn the_byte_bound_stops_the_sender_before_its_count() {
        // 4 bytes each, at most 12: three items (12 bytes), not eight.
        let (rx, sent) = sender(8, 4, 8, 12);
        assert_eq!(settles_at(&sent, 3), 3);
        drop(rx);
    }

    #[test]
    fn a_dropped_receiver_fails_a_blocked_and_a_later_send() {
        let (tx, rx) = queue(2, usize::MAX);
        tx.send(1, 0).unwrap();
        tx.send(2, 0).unwrap();
        let t = std::thread::spawn(move || (tx.send(3, 0), tx.send(4, 0)));
        std::thread::sleep(Duration::from_millis(20));
        drop(rx);
        assert_eq!(t.join().unwrap(), (Err(3), Err(4)));
    }

    #[test]
    fn a_dropped_sender_ends_the_queue_after_its_items() {
        let (tx, rx) = queue(3, usize::MAX);
        tx.send("a", 0).unwrap();
        tx.send("b", 0).unwrap();
        drop(tx);
        assert_eq!((rx.recv(), rx.recv(), rx.recv()), (Some("a"), Some("b"), None));
    }
}
