//! Reusable batch buffers. A batch column of a few megabytes allocated and freed per
//! batch costs page faults (or allocator retention that makes peak memory depend on
//! timing); a [`BufferPool`] hands out vectors that return themselves to the pool when
//! the batch is dropped, so after warm-up a pipeline allocates no new batch memory and
//! its footprint is the buffers in flight plus the pool's `keep`.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};

use super::Element;

/// A pool of `Vec<T>` buffers, shared by the workers of a pipeline (clones share it).
pub struct BufferPool<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    free: Mutex<Vec<Vec<T>>>,
    keep: usize,
}

impl<T> Clone for BufferPool<T> {
    fn clone(&self) -> Self {
        BufferPool { inner: self.inner.clone() }
    }
}

impl<T> fmt::Debug for BufferPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let free = self.inner.free.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("BufferPool").field("free", &free).field("keep", &self.inner.keep).finish()
    }
}

impl<T: Send + 'static> BufferPool<T> {
    /// A pool that keeps at most `keep` idle buffers (more are freed).
    pub fn new(keep: usize) -> Self {
        BufferPool { inner: Arc::new(Inner { free: Mutex::new(Vec::with_capacity(keep)), keep }) }
    }

    /// An empty buffer with room for at least `capacity` elements: a returned one when
    /// the pool has one, else a new allocation.
    pub fn take(&self, capacity: usize) -> PooledVec<T> {
        let reused = self.inner.free.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut vec = reused.unwrap_or_default();
        vec.clear();
        vec.reserve(capacity);
        PooledVec { vec, pool: Some(self.inner.clone()) }
    }

    /// Idle buffers in the pool now.
    pub fn idle(&self) -> usize {
        self.inner.free.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A `Vec<T>` that goes back to its [`BufferPool`] when dropped.
pub struct PooledVec<T: Send + 'static> {
    vec: Vec<T>,
    pool: Option<Arc<Inner<T>>>,
}

impl<T: Send + 'static> PooledVec<T> {
    /// Takes the vector out of the pool's care (it will be freed normally).
    pub fn into_vec(mut self) -> Vec<T> {
        self.pool = None;
        std::mem::take(&mut self.vec)
    }
}

impl<T: Send + 'static> Deref for PooledVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.vec
    }
}

impl<T: Send + 'static> DerefMut for PooledVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.vec
    }
}

impl<T: Send + fmt::Debug + 'static> fmt::Debug for PooledVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.vec.fmt(f)
    }
}

impl<T: Send + 'static> Drop for PooledVec<T> {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let mut free = pool.free.lock().unwrap_or_else(PoisonError::into_inner);
            if free.len() < pool.keep {
                let mut vec = std::mem::take(&mut self.vec);
                vec.clear();
                free.push(vec);
            }
        }
    }
}

impl<T: Element> Element for PooledVec<T> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.vec.capacity() * size_of::<T>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_are_reused() {
        let pool = BufferPool::<f32>::new(2);
        let mut a = pool.take(1000);
        a.extend([1.0, 2.0]);
        let ptr = a.as_ptr();
        drop(a);
        assert_eq!(pool.idle(), 1);
        let b = pool.take(10);
        assert!(b.is_empty(), "returned buffers come back empty");
        assert_eq!(b.as_ptr(), ptr, "the same allocation");
        assert!(b.capacity() >= 1000);
        // The pool keeps at most `keep` idle buffers.
        let (c, d, e) = (pool.take(1), pool.take(1), pool.take(1));
        drop((b, c, d, e));
        assert_eq!(pool.idle(), 2);
        // A buffer taken out of the pool's care does not come back.
        let v = pool.take(5).into_vec();
        assert!(v.capacity() >= 5);
        assert_eq!(pool.idle(), 1);
    }
}
