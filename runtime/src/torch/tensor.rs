//! Batch columns as `tch::Tensor`s: [`TensorBatch`].
//!
//! A column's buffer becomes a tensor without a copy when libtorch has its element type
//! (`bool`, `u8`, `i8`, `i16`, `i32`, `i64`, `f32`, `f64`): the tensor takes ownership of
//! the `Vec` and frees it when the last tensor sharing that storage is dropped (through
//! a small C++ shim, `shim.cpp`, since tch cannot attach a deleter). The unsigned types
//! libtorch barely supports are widened in one contiguous copy: `u16` to `i32`, `u32`
//! and `u64` to `i64` (a `u64` above `i64::MAX` is an error, not a wrap).
//!
//! To a CUDA device, a part of a batch goes through pinned host memory with a
//! non-blocking copy, so the transfer overlaps the work already queued on the device.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::fmt;

use tch::{Device, Kind, Tensor};

use crate::column::{AnyColumn, Buffer, NamedColumns};
use crate::error::{Error, Result};

unsafe extern "C" {
    fn sluice_tensor_from_owned(
        data: *mut c_void,
        dims: *const i64,
        ndims: usize,
        scalar_type: c_int,
        release: unsafe extern "C" fn(*mut c_void),
        ctx: *mut c_void,
        error: *mut *mut c_char,
    ) -> *mut c_void;
    fn sluice_free_error(error: *mut c_char);
}

/// What a tensor made by [`owned_tensor`] keeps alive: the buffer it views.
type Owner = Box<dyn Send>;

/// Frees the buffer of a tensor made by [`owned_tensor`]; libtorch calls it once, from
/// whichever thread drops the last reference to the storage.
unsafe extern "C" fn release(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `Box<Owner>` leaked by `owned_tensor` for this storage, and
    // libtorch calls the deleter exactly once.
    drop(unsafe { Box::from_raw(ctx.cast::<Owner>()) });
}

/// libtorch's `c10::ScalarType` numbers.
fn scalar_type(kind: Kind) -> c_int {
    match kind {
        Kind::Uint8 => 0,
        Kind::Int8 => 1,
        Kind::Int16 => 2,
        Kind::Int => 3,
        Kind::Int64 => 4,
        Kind::Float => 6,
        Kind::Double => 7,
        Kind::Bool => 11,
        other => unreachable!("no column has tensor kind {other:?}"),
    }
}

/// A CPU tensor of `kind` and `shape` over `data`'s memory, owning it.
fn owned_tensor<T: Send + 'static>(data: Vec<T>, shape: &[i64], kind: Kind) -> Result<Tensor> {
    debug_assert_eq!(kind.elt_size_in_bytes(), std::mem::size_of::<T>());
    let mut data = data;
    let ptr = data.as_mut_ptr().cast::<c_void>();
    let ctx = Box::into_raw(Box::new(Box::new(data) as Owner)).cast::<c_void>();
    let mut error: *mut c_char = std::ptr::null_mut();
    // SAFETY: `ptr` points at `shape.iter().product()` initialised values of `kind`'s
    // size (the caller's contract, checked above in debug builds), which stay where they
    // are until `release(ctx)`: moving the `Vec` into the box moved its header, not its
    // heap buffer. `dims` is valid for `shape.len()` values during the call.
    let t = unsafe {
        sluice_tensor_from_owned(
            ptr,
            shape.as_ptr(),
            shape.len(),
            scalar_type(kind),
            release,
            ctx,
            &mut error,
        )
    };
    if t.is_null() {
        // SAFETY: on failure the shim stored a NUL-terminated message it allocated.
        let msg = unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned();
        // SAFETY: freed once, with the shim's own `free`.
        unsafe { sluice_free_error(error) };
        return Err(Error::Invalid(format!("libtorch could not wrap a column of shape {shape:?}: {msg}")));
    }
    // SAFETY: `t` is a fresh `at::Tensor*`, which is what tch's `C_tensor` points to;
    // the `Tensor` takes ownership and deletes it on drop.
    Ok(unsafe { Tensor::from_ptr(t.cast()) })
}

/// `values` widened into `i64`, checking that each fits.
fn widen_u64(values: &[u64]) -> Result<Vec<i64>> {
    values
        .iter()
        .map(|&v| {
            i64::try_from(v).map_err(|_| Error::Invalid(format!("value {v} does not fit a torch int64")))
        })
        .collect()
}

/// The buffer as a tensor of `shape`: without a copy where libtorch has the type.
fn buffer_tensor(buffer: Buffer, shape: &[i64]) -> Result<Tensor> {
    match buffer {
        Buffer::Bool(v) => owned_tensor(v, shape, Kind::Bool),
        Buffer::U8(v) => owned_tensor(v, shape, Kind::Uint8),
        Buffer::I8(v) => owned_tensor(v, shape, Kind::Int8),
        Buffer::I16(v) => owned_tensor(v, shape, Kind::Int16),
        Buffer::I32(v) => owned_tensor(v, shape, Kind::Int),
        Buffer::I64(v) => owned_tensor(v, shape, Kind::Int64),
        Buffer::F32(v) => owned_tensor(v, shape, Kind::Float),
        Buffer::F64(v) => owned_tensor(v, shape, Kind::Double),
        Buffer::U16(v) => owned_tensor(v.into_iter().map(i32::from).collect::<Vec<_>>(), shape, Kind::Int),
        Buffer::U32(v) => owned_tensor(v.into_iter().map(i64::from).collect::<Vec<_>>(), shape, Kind::Int64),
        Buffer::U64(v) => owned_tensor(widen_u64(&v)?, shape, Kind::Int64),
    }
}

fn dims(shape: &[usize]) -> Result<Vec<i64>> {
    shape
        .iter()
        .map(|&d| {
            i64::try_from(d).map_err(|_| Error::Invalid(format!("dimension {d} is too large for a tensor")))
        })
        .collect()
}

/// One column of a [`TensorBatch`].
pub enum Column {
    /// A dense column: `[n, ...row_shape]`.
    Dense(Tensor),
    /// A ragged column (`Vec<T>` or `bytes` rows, not padded): every row's values end to
    /// end, and `n + 1` `int64` offsets (row `i` is `values[offsets[i]..offsets[i + 1]]`).
    Ragged {
        /// The values, 1-D.
        values: Tensor,
        /// The offsets, 1-D `int64`, starting at 0.
        offsets: Tensor,
    },
}

impl fmt::Debug for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Column::Dense(t) => write!(f, "Dense({:?} {:?} on {:?})", t.kind(), t.size(), t.device()),
            Column::Ragged { values, offsets } => write!(
                f,
                "Ragged(values {:?} {:?}, {} rows, on {:?})",
                values.kind(),
                values.size(),
                offsets.size()[0] - 1,
                values.device()
            ),
        }
    }
}

impl Column {
    fn from_any(column: AnyColumn) -> Result<Column> {
        Ok(match column {
            AnyColumn::Dense { shape, data } => Column::Dense(buffer_tensor(data, &dims(&shape)?)?),
            AnyColumn::Ragged { values, offsets } => {
                let n = dims(&[values.len()])?;
                let m = dims(&[offsets.len()])?;
                Column::Ragged {
                    values: buffer_tensor(values, &n)?,
                    offsets: owned_tensor(offsets, &m, Kind::Int64)?,
                }
            }
        })
    }

    /// Rows `start..start + len`: a view of the same memory for a dense column; for a
    /// ragged one, a view of the values and the offsets rebased to start at 0.
    fn rows(&self, start: i64, len: i64) -> Column {
        match self {
            Column::Dense(t) => Column::Dense(t.narrow(0, start, len)),
            Column::Ragged { values, offsets } => {
                let offsets = offsets.narrow(0, start, len + 1);
                let first = offsets.int64_value(&[0]);
                let last = offsets.int64_value(&[len]);
                Column::Ragged { values: values.narrow(0, first, last - first), offsets: offsets - first }
            }
        }
    }

    fn map(&self, f: impl Fn(&Tensor) -> Tensor) -> Column {
        match self {
            Column::Dense(t) => Column::Dense(f(t)),
            Column::Ragged { values, offsets } => Column::Ragged { values: f(values), offsets: f(offsets) },
        }
    }
}

/// A batch as tensors, one [`Column`] per field, in field order.
///
/// Made from a generated batch struct (anything [`NamedColumns`]) by
/// [`from_batch`](TensorBatch::from_batch), without copying the columns.
#[derive(Debug)]
pub struct TensorBatch {
    rows: usize,
    columns: Vec<(&'static str, Column)>,
}

impl TensorBatch {
    /// The batch's columns as CPU tensors, sharing the batch's memory.
    pub fn from_batch<B: NamedColumns>(batch: B) -> Result<TensorBatch> {
        let named = batch.into_named_columns();
        let rows = named.first().map_or(0, |(_, c)| c.rows());
        let mut columns = Vec::with_capacity(named.len());
        for (name, column) in named {
            if column.rows() != rows {
                return Err(Error::Invalid(format!(
                    "column `{name}` has {} rows where the batch has {rows}",
                    column.rows()
                )));
            }
            let column =
                Column::from_any(column).map_err(|e| Error::Invalid(format!("column `{name}`: {e}")))?;
            columns.push((name, column));
        }
        Ok(TensorBatch { rows, columns })
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The bytes of its columns' tensors (the memory it holds, on its device).
    pub(crate) fn bytes(&self) -> usize {
        let size = |t: &Tensor| t.numel() * t.kind().elt_size_in_bytes();
        self.columns
            .iter()
            .map(|(_, c)| match c {
                Column::Dense(t) => size(t),
                Column::Ragged { values, offsets } => size(values) + size(offsets),
            })
            .sum()
    }

    /// The columns' names, in field order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.columns.iter().map(|(n, _)| *n)
    }

    /// The column named `name`.
    pub fn column(&self, name: &str) -> Result<&Column> {
        self.columns.iter().find(|(n, _)| *n == name).map(|(_, c)| c).ok_or_else(|| {
            let names: Vec<_> = self.names().collect();
            Error::Invalid(format!("the batch has no column `{name}` (its columns: {})", names.join(", ")))
        })
    }

    /// The dense column named `name`.
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        match self.column(name)? {
            Column::Dense(t) => Ok(t),
            Column::Ragged { .. } => Err(Error::Invalid(format!(
                "column `{name}` is ragged (values and offsets): read it with `ragged`, or pad it with `padded_batch`"
            ))),
        }
    }

    /// The ragged column named `name`: `(values, offsets)`.
    pub fn ragged(&self, name: &str) -> Result<(&Tensor, &Tensor)> {
        match self.column(name)? {
            Column::Ragged { values, offsets } => Ok((values, offsets)),
            Column::Dense(_) => {
                Err(Error::Invalid(format!("column `{name}` is dense: read it with `tensor`")))
            }
        }
    }

    /// The same batch, sharing its tensors.
    pub fn shallow_clone(&self) -> TensorBatch {
        TensorBatch {
            rows: self.rows,
            columns: self.columns.iter().map(|(n, c)| (*n, c.map(Tensor::shallow_clone))).collect(),
        }
    }

    /// Rows `start..start + len` of every column, sharing this batch's memory.
    pub fn slice(&self, start: usize, len: usize) -> TensorBatch {
        assert!(start + len <= self.rows, "rows {start}..{} of a batch of {}", start + len, self.rows);
        let (s, l) = (start as i64, len as i64);
        TensorBatch { rows: len, columns: self.columns.iter().map(|(n, c)| (*n, c.rows(s, l))).collect() }
    }

    /// The rows of `batches`, one after the other, as one batch on the first batch's
    /// device (a copy): the global batch of a multi-process step, say, from its ranks'
    /// parts. The batches must have the same columns with the same types and row shapes.
    pub fn concat(batches: &[TensorBatch]) -> Result<TensorBatch> {
        let Some(first) = batches.first() else {
            return Err(Error::Invalid("concatenating no batches".into()));
        };
        let device = first.columns.first().map_or(Device::Cpu, |(_, c)| match c {
            Column::Dense(t) => t.device(),
            Column::Ragged { values, .. } => values.device(),
        });
        let mut columns = Vec::with_capacity(first.columns.len());
        for (i, (name, column)) in first.columns.iter().enumerate() {
            let mut same = Vec::with_capacity(batches.len());
            for b in batches {
                match b.columns.get(i) {
                    Some((n, c)) if n == name => same.push(c),
                    _ => {
                        return Err(Error::Invalid(format!(
                            "concatenating batches whose columns differ (`{name}` is not in the same place in all)"
                        )));
                    }
                }
            }
            let joined = match column {
                Column::Dense(_) => {
                    let ts = same
                        .iter()
                        .map(|c| match c {
                            Column::Dense(t) => Ok(t.to_device(device)),
                            Column::Ragged { .. } => Err(Error::Invalid(format!(
                                "column `{name}` is dense in one batch and ragged in another"
                            ))),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Column::Dense(
                        Tensor::f_cat(&ts, 0).map_err(|e| Error::Invalid(format!("column `{name}`: {e}")))?,
                    )
                }
                Column::Ragged { .. } => {
                    let (mut values, mut offsets, mut base) = (Vec::new(), Vec::new(), 0i64);
                    for (k, c) in same.iter().enumerate() {
                        let Column::Ragged { values: v, offsets: o } = c else {
                            return Err(Error::Invalid(format!(
                                "column `{name}` is ragged in one batch and dense in another"
                            )));
                        };
                        let o = o.to_device(device);
                        // Each batch's offsets start at 0: shift them past the values before,
                        // and keep the shared boundary once.
                        let o = if k == 0 { o } else { o.narrow(0, 1, o.size()[0] - 1) };
                        offsets.push(o + base);
                        base += v.size()[0];
                        values.push(v.to_device(device));
                    }
                    let cat = |ts: &[Tensor]| {
                        Tensor::f_cat(ts, 0).map_err(|e| Error::Invalid(format!("column `{name}`: {e}")))
                    };
                    Column::Ragged { values: cat(&values)?, offsets: cat(&offsets)? }
                }
            };
            columns.push((*name, joined));
        }
        Ok(TensorBatch { rows: batches.iter().map(TensorBatch::rows).sum(), columns })
    }

    /// The batch split into `parts` consecutive parts whose sizes differ by at most one
    /// (the first `rows % parts` parts have one row more), sharing this batch's memory.
    pub fn split(&self, parts: usize) -> Vec<TensorBatch> {
        split_sizes(self.rows, parts)
            .into_iter()
            .scan(0, |start, len| {
                let part = self.slice(*start, len);
                *start += len;
                Some(part)
            })
            .collect()
    }

    /// The batch on `device`. To the CPU: the same memory. To a CUDA device: each column
    /// is copied once into pinned host memory, then to the device with a non-blocking
    /// copy (the caller's next use of it on that device is ordered after the copy).
    pub fn to_device(&self, device: Device) -> TensorBatch {
        TensorBatch {
            rows: self.rows,
            columns: self.columns.iter().map(|(n, c)| (*n, self.moved_column(c, device))).collect(),
        }
    }

    /// One column of this batch on `device`, as [`to_device`](Self::to_device) moves it.
    pub(crate) fn moved_column(&self, column: &Column, device: Device) -> Column {
        column.map(|t: &Tensor| match device {
            Device::Cpu => t.shallow_clone(),
            _ => {
                let t = if t.is_contiguous() { t.shallow_clone() } else { t.contiguous() };
                // `_pin_memory` with the target device: `pin_memory(device)` logs a
                // deprecation warning on every call (PyTorch 2.11), and its `is_pinned`
                // check is moot here, the batch is always pageable memory.
                t.internal_pin_memory(device).to_device_(device, t.kind(), true, false)
            }
        })
    }

    /// The columns, in field order.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // the GPU tail's feed
    pub(crate) fn columns(&self) -> &[(&'static str, Column)] {
        &self.columns
    }

    /// A batch of `rows` rows made of these columns (each of `rows` rows).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // the GPU tail's feed
    pub(crate) fn from_columns(rows: usize, columns: Vec<(&'static str, Column)>) -> TensorBatch {
        TensorBatch { rows, columns }
    }
}

/// `rows` split into `parts` sizes differing by at most one, larger first.
pub(crate) fn split_sizes(rows: usize, parts: usize) -> Vec<usize> {
    let parts = parts.max(1);
    (0..parts).map(|i| rows / parts + usize::from(i < rows % parts)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Batchable, ColumnBuilder, Dense};

    /// A two-field batch, like a generated batch struct.
    struct Pair {
        x: Dense<f32, [f32; 3]>,
        name: crate::column::Ragged<u8>,
    }

    impl NamedColumns for Pair {
        fn into_named_columns(self) -> Vec<(&'static str, AnyColumn)> {
            use crate::column::IntoAnyColumn;
            vec![("x", self.x.into_any_column()), ("name", self.name.into_any_column())]
        }
    }

    fn pair(n: usize) -> Pair {
        let mut x = <[f32; 3] as Batchable>::builder(n);
        let mut name = <Vec<u8> as Batchable>::builder(n);
        for i in 0..n {
            x.push([i as f32, i as f32 + 0.5, -(i as f32)]).unwrap();
            name.push(vec![b'a' + i as u8; i % 3]).unwrap();
        }
        Pair { x: x.finish(), name: name.finish() }
    }

    #[test]
    fn columns_become_tensors_without_a_copy() {
        let p = pair(5);
        let ptr = p.x.as_slice().as_ptr();
        let b = TensorBatch::from_batch(p).unwrap();
        assert_eq!(b.rows(), 5);
        let x = b.tensor("x").unwrap();
        assert_eq!((x.kind(), x.size()), (Kind::Float, vec![5, 3]));
        assert_eq!(x.data_ptr().cast_const().cast::<f32>(), ptr, "the tensor views the column's buffer");
        assert_eq!(x.double_value(&[4, 1]), 4.5);
        let (values, offsets) = b.ragged("name").unwrap();
        assert_eq!(Vec::<i64>::try_from(offsets).unwrap(), vec![0, 0, 1, 3, 3, 4]);
        assert_eq!(Vec::<u8>::try_from(values).unwrap(), b"bcce".to_vec());
    }

    #[test]
    fn a_view_keeps_the_buffer_alive_after_the_batch_is_gone() {
        let view = {
            let b = TensorBatch::from_batch(pair(4)).unwrap();
            b.tensor("x").unwrap().narrow(0, 2, 2)
        };
        // The batch and its tensors are dropped; the view still owns the storage.
        assert_eq!(Vec::<f32>::try_from(view.flatten(0, 1)).unwrap(), vec![2.0, 2.5, -2.0, 3.0, 3.5, -3.0]);
    }

    #[test]
    fn split_gives_near_equal_parts_over_the_same_memory() {
        let b = TensorBatch::from_batch(pair(5)).unwrap();
        let parts = b.split(3);
        assert_eq!(parts.iter().map(TensorBatch::rows).collect::<Vec<_>>(), vec![2, 2, 1]);
        let x2 = parts[2].tensor("x").unwrap();
        assert_eq!(x2.double_value(&[0, 0]), 4.0);
        let (values, offsets) = parts[1].ragged("name").unwrap();
        assert_eq!(Vec::<i64>::try_from(offsets).unwrap(), vec![0, 2, 2]);
        assert_eq!(Vec::<u8>::try_from(values).unwrap(), b"cc".to_vec());
        // More parts than rows: the last parts are empty.
        let parts = TensorBatch::from_batch(pair(1)).unwrap().split(2);
        assert_eq!(parts.iter().map(TensorBatch::rows).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(parts[1].tensor("x").unwrap().size(), vec![0, 3]);
    }

    #[test]
    fn concat_joins_the_rows_of_split_parts_back() {
        let whole = TensorBatch::from_batch(pair(7)).unwrap();
        let parts = whole.split(3);
        let joined = TensorBatch::concat(&parts).unwrap();
        assert_eq!(joined.rows(), 7);
        let x = |b: &TensorBatch| Vec::<f32>::try_from(b.tensor("x").unwrap().flatten(0, 1)).unwrap();
        assert_eq!(x(&joined), x(&whole));
        let ragged = |b: &TensorBatch| {
            let (v, o) = b.ragged("name").unwrap();
            (Vec::<u8>::try_from(v).unwrap(), Vec::<i64>::try_from(o).unwrap())
        };
        assert_eq!(ragged(&joined), ragged(&whole));
        // An empty part adds nothing; batches of other columns are an error.
        let with_empty = TensorBatch::concat(&[parts[0].shallow_clone(), whole.slice(7, 0)]).unwrap();
        assert_eq!(ragged(&with_empty), ragged(&parts[0]));
        let other = TensorBatch::from_columns(
            1,
            vec![("y", Column::Dense(Tensor::zeros([1], (Kind::Float, Device::Cpu))))],
        );
        let e = TensorBatch::concat(&[whole.shallow_clone(), other]).unwrap_err();
        assert!(e.to_string().contains("columns differ"), "{e}");
        assert!(TensorBatch::concat(&[]).is_err());
    }

    #[test]
    fn unsigned_columns_widen_and_u64_overflow_is_an_error() {
        let t = buffer_tensor(Buffer::U16(vec![1, 65535]), &[2]).unwrap();
        assert_eq!((t.kind(), Vec::<i32>::try_from(t).unwrap()), (Kind::Int, vec![1, 65535]));
        let t = buffer_tensor(Buffer::U64(vec![7]), &[1]).unwrap();
        assert_eq!(t.kind(), Kind::Int64);
        let e = buffer_tensor(Buffer::U64(vec![u64::MAX]), &[1]).unwrap_err();
        assert!(e.to_string().contains("does not fit a torch int64"), "{e}");
    }

    #[test]
    fn unknown_and_mismatched_columns_are_named() {
        let b = TensorBatch::from_batch(pair(2)).unwrap();
        let e = b.tensor("y").unwrap_err().to_string();
        assert!(e.contains("no column `y`") && e.contains("x, name"), "{e}");
        let e = b.tensor("name").unwrap_err().to_string();
        assert!(e.contains("ragged"), "{e}");
    }

    #[test]
    fn cpu_device_is_the_same_memory() {
        let b = TensorBatch::from_batch(pair(3)).unwrap();
        let c = b.to_device(Device::Cpu);
        assert_eq!(c.tensor("x").unwrap().data_ptr(), b.tensor("x").unwrap().data_ptr());
    }
}
