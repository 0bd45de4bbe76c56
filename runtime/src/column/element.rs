//! [`Element`]: what can flow through a pipeline, and its approximate size in memory
//! (for statistics and for the memory budget that AUTOTUNE respects). It lives with the
//! columns, which hold elements, beneath the stages, which name it as `stage::Element`.

use std::mem::size_of;
use std::path::PathBuf;
use std::sync::Arc;

/// A value that can flow between stages: sendable to worker threads, with a cheap
/// estimate of the bytes it holds. `impl Element for MyStruct {}` counts the struct's own
/// size; override [`byte_size`](Element::byte_size) to add what it owns on the heap.
pub trait Element: Send + Sized + 'static {
    /// True when `byte_size` is `size_of::<Self>()` (no heap data), so containers can
    /// compute their size without visiting every element.
    const FLAT: bool = true;

    /// Bytes this value holds, inline and on the heap (an estimate; must be cheap).
    fn byte_size(&self) -> usize {
        size_of::<Self>()
    }
}

macro_rules! flat {
    ($($t:ty),*) => { $(impl Element for $t {})* };
}
flat!((), bool, char, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

impl<T: Element> Element for Vec<T> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>()
            + if T::FLAT { self.len() * size_of::<T>() } else { self.iter().map(Element::byte_size).sum() }
    }
}

impl<T: Element> Element for Box<[T]> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>()
            + if T::FLAT { self.len() * size_of::<T>() } else { self.iter().map(Element::byte_size).sum() }
    }
}

impl<T: Element + Sync> Element for Arc<[T]> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>()
            + if T::FLAT { self.len() * size_of::<T>() } else { self.iter().map(Element::byte_size).sum() }
    }
}

impl<T: Element, const N: usize> Element for [T; N] {
    const FLAT: bool = T::FLAT;
    fn byte_size(&self) -> usize {
        if T::FLAT { size_of::<Self>() } else { self.iter().map(Element::byte_size).sum() }
    }
}

impl Element for String {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.len()
    }
}

impl Element for PathBuf {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.as_os_str().len()
    }
}

impl<T: Element> Element for Option<T> {
    const FLAT: bool = T::FLAT;
    fn byte_size(&self) -> usize {
        size_of::<Self>() - size_of::<T>() + self.as_ref().map_or(size_of::<T>(), Element::byte_size)
    }
}

macro_rules! tuple {
    ($($n:ident),+) => {
        impl<$($n: Element),+> Element for ($($n,)+) {
            const FLAT: bool = $($n::FLAT)&&+;
            #[allow(non_snake_case)]
            fn byte_size(&self) -> usize {
                let ($($n,)+) = self;
                size_of::<Self>() $(+ $n.byte_size() - size_of::<$n>())+
            }
        }
    };
}
tuple!(A);
tuple!(A, B);
tuple!(A, B, C);
tuple!(A, B, C, D);
tuple!(A, B, C, D, E);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_count_heap_data() {
        assert_eq!(7u32.byte_size(), 4);
        assert_eq!(vec![0u8; 100].byte_size(), 24 + 100);
        assert_eq!(vec![vec![0u8; 10], vec![0u8; 5]].byte_size(), 24 + (24 + 10) + (24 + 5));
        assert_eq!((1u64, vec![0f32; 4]).byte_size(), 32 + 16);
        assert_eq!(String::from("abc").byte_size(), 24 + 3);
        const { assert!(<(u8, f32)>::FLAT && !<(u8, String)>::FLAT) };
    }
}
