//! `batch`, `padded_batch` and `unbatch` through the public API: exact column contents
//! for every batchable type, remainders, shape errors, padding, and round trips.

use proptest::prelude::*;
use sluice_runtime::Error;
use sluice_runtime::column::{
    Batchable, ColumnBuilder, ColumnError, ColumnErrorKind, Columns, DType, Dense, PadLen, PadShape, Ragged,
    Scalar, Tensor, check_rows,
};
use sluice_runtime::stage::{Dataset, Element, from_vec, range};

/// Every element of one pass, or the first error.
fn collect<D: Dataset>(d: &D) -> Result<Vec<D::Item>, Error> {
    d.stream()?.collect()
}

/// The elements before the error, and the error.
fn collect_until_err<D: Dataset>(d: &D) -> (Vec<D::Item>, Error) {
    let mut ok = Vec::new();
    for x in d.stream().expect("stream starts") {
        match x {
            Ok(x) => ok.push(x),
            Err(e) => return (ok, e),
        }
    }
    panic!("the pass ended without an error");
}

/// The [`ColumnError`] a batching stage named `stage` failed with.
fn column_error(e: &Error, stage: &str) -> ColumnError {
    match e {
        Error::Stage { stage: s, source } if s == stage => {
            source.downcast_ref::<ColumnError>().expect("a column error").clone()
        }
        other => panic!("expected a column error from `{stage}`, got {other:?}"),
    }
}

fn tensor<T: Scalar>(shape: &[usize], data: Vec<T>) -> Tensor<T> {
    Tensor::new(shape.to_vec(), data).expect("valid tensor")
}

fn check_scalars<T>(f: fn(u64) -> T, dtype: DType)
where
    T: Scalar + Batchable<Columns = Dense<T>>,
{
    let batches = collect(&range(0..7).map(f).batch(3, false)).unwrap();
    let got: Vec<(Vec<usize>, Vec<T>)> =
        batches.iter().map(|b| (b.shape().to_vec(), b.as_slice().to_vec())).collect();
    let want: Vec<(Vec<usize>, Vec<T>)> =
        vec![(vec![3], (0..3).map(f).collect()), (vec![3], (3..6).map(f).collect()), (vec![1], vec![f(6)])];
    assert_eq!(got, want);
    assert_eq!(batches[0].dtype(), dtype);
    assert_eq!(batches[2].clone().into_vec(), vec![f(6)]);
}

#[test]
fn scalars_batch_into_one_dense_column() {
    check_scalars(|x| x as u8, DType::U8);
    check_scalars(|x| x as i32 - 3, DType::I32);
    check_scalars(|x| x as i64 * -1000, DType::I64);
    check_scalars(|x| x as f32 / 2.0, DType::F32);
    check_scalars(|x| x as f64 * 1.5, DType::F64);
}

#[test]
fn drop_remainder_drops_only_a_partial_last_batch() {
    let lens = |d: &dyn Fn() -> Vec<Dense<u64>>| d().iter().map(Dense::len).collect::<Vec<_>>();
    assert_eq!(lens(&|| collect(&range(0..7).batch(3, true)).unwrap()), [3, 3]);
    assert_eq!(lens(&|| collect(&range(0..7).batch(3, false)).unwrap()), [3, 3, 1]);
    assert_eq!(lens(&|| collect(&range(0..6).batch(3, true)).unwrap()), [3, 3]);
    assert_eq!(lens(&|| collect(&range(0..6).batch(3, false)).unwrap()), [3, 3]);
    assert_eq!(lens(&|| collect(&range(0..2).batch(3, true)).unwrap()), Vec::<usize>::new());
    assert_eq!(lens(&|| collect(&range(0..0).batch(3, false)).unwrap()), Vec::<usize>::new());
}

#[test]
fn a_batch_size_of_zero_is_invalid() {
    assert!(matches!(range(0..3).batch(0, false).stream(), Err(Error::Invalid(_))));
    let padded = from_vec(vec![vec![1u8]]).padded_batch(0, false, PadLen::longest(0));
    assert!(matches!(padded.stream(), Err(Error::Invalid(_))));
}

#[test]
fn fixed_arrays_batch_into_n_by_len() {
    let data: Vec<[i32; 3]> = (0..5).map(|i| [i, 10 * i, 100 * i]).collect();
    let batches = collect(&from_vec(data).batch(2, false)).unwrap();
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[0].shape(), [2, 3]);
    assert_eq!(batches[0].as_slice(), [0, 0, 0, 1, 10, 100]);
    assert_eq!(batches[1].as_slice(), [2, 20, 200, 3, 30, 300]);
    assert_eq!(batches[2].shape(), [1, 3]);
    assert_eq!(batches[2].as_slice(), [4, 40, 400]);
}

#[test]
fn tensors_of_one_shape_batch_into_n_by_shape() {
    let data: Vec<Tensor<f32>> = (0..3).map(|i| tensor(&[2, 2], vec![i as f32; 4])).collect();
    let batches = collect(&from_vec(data).batch(3, false)).unwrap();
    assert_eq!(batches.len(), 1);
    let (shape, values) = batches[0].clone().into_parts();
    assert_eq!(shape, [3, 2, 2]);
    assert_eq!(values, [0., 0., 0., 0., 1., 1., 1., 1., 2., 2., 2., 2.]);
}

#[test]
fn tensors_of_different_shapes_are_an_error_naming_the_element() {
    let data = vec![
        tensor(&[2], vec![1i64, 2]),
        tensor(&[2], vec![3, 4]),
        tensor(&[2], vec![5, 6]),
        tensor(&[3], vec![9, 9, 9]),
        tensor(&[2], vec![7, 8]),
    ];
    let (ok, e) = collect_until_err(&from_vec(data).batch(2, false));
    assert_eq!(ok.len(), 1);
    let ce = column_error(&e, "batch");
    assert_eq!(
        ce,
        ColumnError {
            batch: 1,
            index: 1,
            field: String::new(),
            kind: ColumnErrorKind::ShapeMismatch { expected: vec![2], found: vec![3] },
        }
    );
    assert_eq!(
        e.to_string(),
        "stage `batch`: batch 1, element 1: shape [3] differs from the batch's shape [2] \
         (use padded_batch for variable shapes)"
    );
}

#[test]
fn vectors_batch_into_ragged_values_and_offsets() {
    let data = vec![vec![1i64, 2, 3], vec![], vec![4], vec![5, 6], vec![]];
    let batches = collect(&from_vec(data).batch(3, false)).unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].values(), [1, 2, 3, 4]);
    assert_eq!(batches[0].offsets(), [0, 3, 3, 4]);
    assert_eq!(batches[0].row_values(1), [] as [i64; 0]);
    assert_eq!(batches[1].values(), [5, 6]);
    assert_eq!(batches[1].offsets(), [0, 2, 2]);
    assert_eq!(batches[1].len(), 2);
}

#[test]
fn bytes_batch_into_a_ragged_bytes_column() {
    let data: Vec<Vec<u8>> = vec![b"ab".to_vec(), b"".to_vec(), b"cde".to_vec()];
    let batches = collect(&from_vec(data).batch(8, false)).unwrap();
    let (values, offsets) = batches[0].clone().into_parts();
    assert_eq!(values, b"abcde");
    assert_eq!(offsets, [0, 2, 2, 5]);
    assert_eq!(batches[0].dtype(), DType::U8);
}

#[test]
fn tuples_batch_field_by_field() {
    let one = collect(&range(0..3).map(|i| (i as i32,)).batch(2, false)).unwrap();
    assert_eq!(one[0].0.as_slice(), [0, 1]);
    assert_eq!(one[1].0.as_slice(), [2]);

    let two = collect(&range(0..3).map(|i| (i as f64, vec![i as u8; i as usize])).batch(3, false)).unwrap();
    assert_eq!(two[0].0.as_slice(), [0., 1., 2.]);
    assert_eq!(two[0].1.values(), [1, 2, 2]);
    assert_eq!(two[0].1.offsets(), [0, 0, 1, 3]);

    let four = range(0..4).map(|i| {
        let i = i as i64;
        (i, vec![i as i32; 2], [i as u8, 2 * i as u8], tensor(&[1, 2], vec![i as f32, -(i as f32)]))
    });
    let b = collect(&four.batch(4, false)).unwrap();
    assert_eq!(b.len(), 1);
    let (a, v, arr, t) = &b[0];
    assert_eq!(a.as_slice(), [0, 1, 2, 3]);
    assert_eq!(v.values(), [0, 0, 1, 1, 2, 2, 3, 3]);
    assert_eq!(v.offsets(), [0, 2, 4, 6, 8]);
    assert_eq!(arr.shape(), [4, 2]);
    assert_eq!(arr.as_slice(), [0, 0, 1, 2, 2, 4, 3, 6]);
    assert_eq!(t.shape(), [4, 1, 2]);
    assert_eq!(t.as_slice(), [0., -0., 1., -1., 2., -2., 3., -3.]);
}

#[test]
fn a_shape_error_in_a_tuple_names_the_field() {
    let data = vec![(1u8, tensor(&[2], vec![1i32, 2])), (2u8, tensor(&[1, 2], vec![3, 4]))];
    let (ok, e) = collect_until_err(&from_vec(data).batch(2, false));
    assert!(ok.is_empty());
    let ce = column_error(&e, "batch");
    assert_eq!((ce.batch, ce.index, ce.field.as_str()), (0, 1, "1"));
    assert_eq!(ce.kind, ColumnErrorKind::ShapeMismatch { expected: vec![2], found: vec![1, 2] });
    assert!(e.to_string().contains("batch 0, element 1, field `1`: shape [1, 2]"), "{e}");
}

#[test]
fn padded_vectors_are_padded_to_the_longest_of_each_batch() {
    let data = vec![vec![1i32], vec![2, 3, 4], vec![], vec![5, 6], vec![7]];
    let batches = collect(&from_vec(data).padded_batch(3, false, PadLen::longest(-1))).unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].shape(), [3, 3]);
    assert_eq!(batches[0].as_slice(), [1, -1, -1, 2, 3, 4, -1, -1, -1]);
    assert_eq!(batches[1].shape(), [2, 2]);
    assert_eq!(batches[1].as_slice(), [5, 6, 7, -1]);
}

#[test]
fn padded_vectors_are_padded_to_a_multiple_of_the_longest() {
    // `padded_batch(3, pad_to_multiple: 4)`: longest 3 -> 4, longest 5 -> 8, an empty
    // batch row shape stays 0, an exact multiple stays.
    let data = vec![vec![1i32], vec![2, 3, 4], vec![], vec![5, 6, 7, 8, 9], vec![1, 2, 3, 4]];
    let batches =
        collect(&from_vec(data).padded_batch(3, false, PadLen::longest(-1).multiple_of(4))).unwrap();
    assert_eq!(batches[0].shape(), [3, 4]);
    assert_eq!(batches[0].as_slice(), [1, -1, -1, -1, 2, 3, 4, -1, -1, -1, -1, -1]);
    assert_eq!(batches[1].shape(), [2, 8]);
    assert_eq!(batches[1].as_slice(), [5, 6, 7, 8, 9, -1, -1, -1, 1, 2, 3, 4, -1, -1, -1, -1]);
    let exact =
        collect(&from_vec(vec![vec![1u8; 8]]).padded_batch(2, false, PadLen::longest(0).multiple_of(4)))
            .unwrap();
    assert_eq!(exact[0].shape(), [1, 8]);
    let empty =
        collect(&from_vec(vec![Vec::<u8>::new()]).padded_batch(2, false, PadLen::longest(0).multiple_of(4)))
            .unwrap();
    assert_eq!(empty[0].shape(), [1, 0]);
}

#[test]
fn padded_vectors_of_length_zero_make_an_empty_row_shape() {
    let batches =
        collect(&from_vec(vec![Vec::<u8>::new(); 2]).padded_batch(4, false, PadLen::longest(0))).unwrap();
    assert_eq!(batches[0].shape(), [2, 0]);
    assert!(batches[0].as_slice().is_empty());
}

#[test]
fn padded_vectors_are_padded_to_a_declared_length() {
    let data = vec![vec![1u8, 2], vec![], vec![3, 4, 5]];
    let batches = collect(&from_vec(data).padded_batch(2, false, PadLen::to(3, 0))).unwrap();
    assert_eq!(batches[0].shape(), [2, 3]);
    assert_eq!(batches[0].as_slice(), [1, 2, 0, 0, 0, 0]);
    assert_eq!(batches[1].shape(), [1, 3]);
    assert_eq!(batches[1].as_slice(), [3, 4, 5]);
}

#[test]
fn an_element_longer_than_the_declared_length_is_an_error_naming_it() {
    let data = vec![vec![1u8, 2], vec![3, 4, 5]];
    let (ok, e) = collect_until_err(&from_vec(data).padded_batch(2, false, PadLen::to(2, 0)));
    assert!(ok.is_empty());
    let ce = column_error(&e, "padded_batch");
    assert_eq!(
        ce,
        ColumnError {
            batch: 0,
            index: 1,
            field: String::new(),
            kind: ColumnErrorKind::TooLong { found: vec![3], declared: vec![Some(2)] },
        }
    );
    assert_eq!(
        e.to_string(),
        "stage `padded_batch`: batch 0, element 1: shape [3] is longer than the declared padded shape [2]"
    );
}

#[test]
fn a_declared_padded_shape_too_large_for_memory_is_an_error() {
    let (_, e) =
        collect_until_err(&from_vec(vec![vec![1u8]]).padded_batch(2, false, PadLen::to(usize::MAX / 2, 0)));
    let ce = column_error(&e, "padded_batch");
    assert_eq!((ce.index, ce.kind), (0, ColumnErrorKind::TooLarge { shape: vec![1, usize::MAX / 2] }));

    let huge = PadShape::to([Some(usize::MAX / 4), Some(8)], 0i32);
    let (_, e) = collect_until_err(&from_vec(vec![tensor(&[1, 1], vec![1i32])]).padded_batch(2, false, huge));
    let ce = column_error(&e, "padded_batch");
    assert_eq!((ce.index, ce.kind), (0, ColumnErrorKind::TooLarge { shape: vec![1, usize::MAX / 4, 8] }));
    assert!(e.to_string().ends_with("would not fit in memory"), "{e}");
}

#[test]
fn padded_tensors_are_padded_in_every_dimension() {
    let data = vec![tensor(&[1, 2], vec![1i64, 2]), tensor(&[2, 1], vec![3, 4]), tensor(&[0, 3], vec![])];
    let batches = collect(&from_vec(data.clone()).padded_batch(3, false, PadShape::longest(0))).unwrap();
    assert_eq!(batches[0].shape(), [3, 2, 3]);
    #[rustfmt::skip]
    assert_eq!(batches[0].as_slice(), [
        1, 2, 0,  0, 0, 0,
        3, 0, 0,  4, 0, 0,
        0, 0, 0,  0, 0, 0,
    ]);

    let declared = PadShape::to([Some(3), None], 9);
    let batches = collect(&from_vec(data).padded_batch(2, false, declared)).unwrap();
    assert_eq!(batches[0].shape(), [2, 3, 2]);
    assert_eq!(batches[0].as_slice(), [1, 2, 9, 9, 9, 9, 3, 9, 4, 9, 9, 9]);
    assert_eq!(batches[1].shape(), [1, 3, 3]);
    assert_eq!(batches[1].as_slice(), [9; 9]);
}

#[test]
fn padded_tensors_of_rank_zero_batch_into_a_vector() {
    let data = vec![tensor(&[], vec![1.5f32]), tensor(&[], vec![2.5])];
    let batches = collect(&from_vec(data).padded_batch(2, false, PadShape::longest(0.0))).unwrap();
    assert_eq!(batches[0].shape(), [2]);
    assert_eq!(batches[0].as_slice(), [1.5, 2.5]);
}

#[test]
fn padded_tensor_errors_name_the_element() {
    let data = vec![tensor(&[2, 2], vec![0i32; 4]), tensor(&[1, 5], vec![0; 5])];
    let (_, e) =
        collect_until_err(&from_vec(data.clone()).padded_batch(2, false, PadShape::to([None, Some(4)], 0)));
    let ce = column_error(&e, "padded_batch");
    assert_eq!(ce.index, 1);
    assert_eq!(ce.kind, ColumnErrorKind::TooLong { found: vec![1, 5], declared: vec![None, Some(4)] });
    assert!(e.to_string().ends_with("shape [1, 5] is longer than the declared padded shape [?, 4]"), "{e}");

    let data = vec![tensor(&[2], vec![0i32; 2]), tensor(&[1, 1], vec![0])];
    let (_, e) = collect_until_err(&from_vec(data).padded_batch(2, false, PadShape::longest(0)));
    let ce = column_error(&e, "padded_batch");
    assert_eq!((ce.index, ce.kind), (1, ColumnErrorKind::RankMismatch { expected: 1, found: vec![1, 1] }));
}

#[test]
fn padded_tuples_pad_only_their_variable_fields() {
    let data: Vec<(i64, Vec<u8>, [f32; 2])> =
        (0..3).map(|i| (i, vec![b'x'; i as usize], [i as f32, 0.5])).collect();
    let padding = ((), PadLen::longest(b'.'), ());
    let batches = collect(&from_vec(data).padded_batch(3, true, padding)).unwrap();
    let (ids, text, pairs) = &batches[0];
    assert_eq!(ids.as_slice(), [0, 1, 2]);
    assert_eq!(text.shape(), [3, 2]);
    assert_eq!(text.as_slice(), b"..x.xx");
    assert_eq!(pairs.as_slice(), [0., 0.5, 1., 0.5, 2., 0.5]);
}

#[test]
fn unbatch_of_a_padded_batch_gives_padded_elements() {
    let data = vec![vec![1u8], vec![2, 3]];
    let rows = collect(&from_vec(data).padded_batch(2, false, PadLen::longest(0)).unbatch()).unwrap();
    assert_eq!(rows, [vec![1, 0], vec![2, 3]]);
    let data = vec![tensor(&[1], vec![1i32]), tensor(&[2], vec![2, 3])];
    let rows = collect(&from_vec(data).padded_batch(2, false, PadShape::longest(0)).unbatch()).unwrap();
    assert_eq!(rows, [tensor(&[2], vec![1, 0]), tensor(&[2], vec![2, 3])]);
}

#[test]
fn unbatch_rejects_columns_that_disagree_on_rows() {
    let good =
        (Dense::<i32>::new(vec![2], vec![1, 2]).unwrap(), Ragged::new(vec![7u8], vec![0, 1, 1]).unwrap());
    let bad = (Dense::<i32>::new(vec![2], vec![3, 4]).unwrap(), Ragged::new(vec![7u8], vec![0, 1]).unwrap());
    let (ok, e) = collect_until_err(&from_vec(vec![good, bad]).unbatch());
    assert_eq!(ok, [(1, vec![7]), (2, vec![])]);
    let ce = column_error(&e, "unbatch");
    assert_eq!((ce.batch, ce.field.as_str()), (1, "1"));
    assert_eq!(ce.kind, ColumnErrorKind::RowCount { expected: 2, found: 1 });
}

#[test]
fn column_constructors_check_their_parts() {
    assert!(Dense::<f32>::new(vec![2], vec![1.0]).is_err());
    assert!(Dense::<f32>::new(vec![2, 1], vec![1.0, 2.0]).is_err(), "scalar rows need rank 1");
    assert!(Dense::<f32, [f32; 2]>::new(vec![1, 3], vec![1.0; 3]).is_err());
    assert!(Dense::<f32, Tensor<f32>>::new(vec![], vec![1.0]).is_err());
    assert!(Dense::<f32, Tensor<f32>>::new(vec![1, 3], vec![1.0; 3]).is_ok());
    assert!(Ragged::<u8>::new(vec![1, 2], vec![0, 3]).is_err());
    assert!(Ragged::<u8>::new(vec![1, 2], vec![1, 2]).is_err());
    assert!(Ragged::<u8>::new(vec![1, 2], vec![0, 2, 1, 2]).is_err());
    assert!(Ragged::<u8>::new(vec![], vec![]).is_err());
    assert!(Ragged::<u8>::new(vec![], vec![0]).is_ok());
    assert!(Tensor::new(vec![2, 2], vec![0u8; 3]).is_err());
    assert!(Tensor::new(vec![usize::MAX, 2], vec![0u8; 2]).is_err());
}

#[test]
fn an_upstream_error_ends_the_pass_after_the_batches_before_it() {
    let failing =
        range(0..10).try_map(|x| if x == 5 { Err(format!("bad element {x}")) } else { Ok(x as i32) });
    let (ok, e) = collect_until_err(&failing.batch(2, false));
    assert_eq!(ok.iter().map(|b| b.as_slice().to_vec()).collect::<Vec<_>>(), [vec![0, 1], vec![2, 3]]);
    assert!(matches!(&e, Error::Stage { stage, .. } if stage == "map"), "{e:?}");
    assert_eq!(e.to_string(), "stage `map`: bad element 5");

    let failing = range(0..10).try_map(|x| if x == 5 { Err("bad") } else { Ok(x as i32) });
    let (ok, e) = collect_until_err(&failing.batch(2, false).unbatch());
    assert_eq!(ok, [0, 1, 2, 3]);
    assert!(matches!(&e, Error::Stage { stage, .. } if stage == "map"), "{e:?}");
}

#[test]
fn stats_count_batches_and_rows() {
    let d = range(0..10).map(|x| x as u8).batch(4, false).unbatch();
    let mut s = d.stream().unwrap();
    assert_eq!(s.by_ref().count(), 10);
    let report = s.report();
    let stage = |name: &str| report.stages.iter().find(|s| s.name == name).expect(name).clone();
    let batch = stage("batch");
    assert_eq!(batch.elements, 3);
    assert_eq!(batch.bytes as usize, 3 * std::mem::size_of::<Dense<u8>>() + 3 * 8 + 10);
    let unbatch = stage("unbatch");
    assert_eq!((unbatch.elements, unbatch.bytes), (10, 10));
}

/// A record and its batch, written the way generated code writes them: one column and
/// one builder per field, errors tagged with the field's name.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    id: i64,
    pixels: [u8; 4],
    tokens: Vec<i32>,
}

impl Element for Record {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        std::mem::size_of::<Self>() + self.tokens.len() * 4
    }
}

#[derive(Debug, Clone, PartialEq)]
struct RecordBatch<Tokens> {
    id: <i64 as Batchable>::Columns,
    pixels: <[u8; 4] as Batchable>::Columns,
    tokens: Tokens,
}

impl<Tokens: Element> Element for RecordBatch<Tokens> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        self.id.byte_size() + self.pixels.byte_size() + self.tokens.byte_size()
    }
}

impl<Tokens: Columns<Row = Vec<i32>>> Columns for RecordBatch<Tokens> {
    type Row = Record;
    fn num_rows(&self) -> Result<usize, ColumnError> {
        check_rows(&[
            ("id", self.id.num_rows()?),
            ("pixels", self.pixels.num_rows()?),
            ("tokens", self.tokens.num_rows()?),
        ])
    }
    fn row(&self, i: usize) -> Record {
        Record { id: self.id.row(i), pixels: self.pixels.row(i), tokens: self.tokens.row(i) }
    }
}

#[derive(Debug)]
struct RecordBuilder<Tokens> {
    id: <i64 as Batchable>::Builder,
    pixels: <[u8; 4] as Batchable>::Builder,
    tokens: Tokens,
}

impl<Tokens: ColumnBuilder<Item = Vec<i32>, Columns: Columns<Row = Vec<i32>>>> ColumnBuilder
    for RecordBuilder<Tokens>
{
    type Item = Record;
    type Columns = RecordBatch<Tokens::Columns>;
    fn push(&mut self, x: Record) -> Result<(), ColumnError> {
        self.id.push(x.id).map_err(|e| e.in_field("id"))?;
        self.pixels.push(x.pixels).map_err(|e| e.in_field("pixels"))?;
        self.tokens.push(x.tokens).map_err(|e| e.in_field("tokens"))?;
        Ok(())
    }
    fn finish(self) -> Self::Columns {
        RecordBatch { id: self.id.finish(), pixels: self.pixels.finish(), tokens: self.tokens.finish() }
    }
}

impl Batchable for Record {
    type Columns = RecordBatch<Ragged<i32>>;
    type Builder = RecordBuilder<<Vec<i32> as Batchable>::Builder>;
    type Padding = PadLen<i32>;
    type Padded = RecordBatch<Dense<i32, Vec<i32>>>;
    type PaddedBuilder = RecordBuilder<<Vec<i32> as Batchable>::PaddedBuilder>;
    fn builder(n: usize) -> Self::Builder {
        RecordBuilder { id: i64::builder(n), pixels: <[u8; 4]>::builder(n), tokens: Vec::<i32>::builder(n) }
    }
    fn padded_builder(n: usize, tokens: &PadLen<i32>) -> Self::PaddedBuilder {
        RecordBuilder {
            id: i64::padded_builder(n, &()),
            pixels: <[u8; 4]>::padded_builder(n, &()),
            tokens: Vec::<i32>::padded_builder(n, tokens),
        }
    }
}

fn records() -> Vec<Record> {
    (0..5).map(|i| Record { id: i, pixels: [i as u8; 4], tokens: (0..i as i32).collect() }).collect()
}

#[test]
fn a_struct_batches_like_generated_code_would() {
    let batches = collect(&from_vec(records()).batch(4, false)).unwrap();
    assert_eq!(batches[0].id.as_slice(), [0, 1, 2, 3]);
    assert_eq!(batches[0].pixels.shape(), [4, 4]);
    assert_eq!(batches[0].tokens.offsets(), [0, 0, 1, 3, 6]);
    assert_eq!(collect(&from_vec(records()).batch(4, false).unbatch()).unwrap(), records());

    let (padded, e) = collect_until_err(&from_vec(records()).padded_batch(2, false, PadLen::to(3, -1)));
    assert_eq!(padded.len(), 2);
    assert_eq!(padded[1].tokens.as_slice(), [0, 1, -1, 0, 1, 2]);
    let ce = column_error(&e, "padded_batch");
    assert_eq!((ce.batch, ce.index, ce.field.as_str()), (2, 0, "tokens"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn unbatch_inverts_batch(
        xs in prop::collection::vec(
            (any::<i32>(), prop::collection::vec(any::<u8>(), 0..6), any::<[i16; 2]>(), any::<bool>()),
            0..40,
        ),
        n in 1usize..9,
    ) {
        let back = collect(&from_vec(xs.clone()).batch(n, false).unbatch()).unwrap();
        prop_assert_eq!(back, xs.clone());
        let kept = xs.len() / n * n;
        let dropped = collect(&from_vec(xs.clone()).batch(n, true).unbatch()).unwrap();
        prop_assert_eq!(dropped, xs[..kept].to_vec());
    }

    #[test]
    fn padded_vectors_match_a_naive_padding(
        xs in prop::collection::vec(prop::collection::vec(any::<i16>(), 0..7), 0..30),
        n in 1usize..6,
    ) {
        let batches = collect(&from_vec(xs.clone()).padded_batch(n, false, PadLen::longest(-7))).unwrap();
        prop_assert_eq!(batches.len(), xs.len().div_ceil(n));
        for (b, chunk) in batches.iter().zip(xs.chunks(n)) {
            let longest = chunk.iter().map(Vec::len).max().unwrap_or(0);
            let mut want = Vec::new();
            for x in chunk {
                want.extend_from_slice(x);
                want.resize(want.len() + longest - x.len(), -7);
            }
            prop_assert_eq!(b.shape(), [chunk.len(), longest]);
            prop_assert_eq!(b.as_slice(), &want[..]);
        }
    }

    #[test]
    fn padded_tensors_match_a_naive_padding(
        shapes in prop::collection::vec((0usize..4, 0usize..4, 0usize..3), 1..10),
        n in 1usize..4,
    ) {
        let xs: Vec<Tensor<i32>> = shapes
            .iter()
            .enumerate()
            .map(|(k, &(a, b, c))| tensor(&[a, b, c], (0..a * b * c).map(|j| (k * 100 + j) as i32).collect()))
            .collect();
        let batches = collect(&from_vec(xs.clone()).padded_batch(n, false, PadShape::longest(-1))).unwrap();
        for (batch, chunk) in batches.iter().zip(xs.chunks(n)) {
            let top: Vec<usize> = (0..3).map(|d| chunk.iter().map(|t| t.shape()[d]).max().unwrap()).collect();
            let mut want = vec![-1; chunk.len() * top[0] * top[1] * top[2]];
            for (r, t) in chunk.iter().enumerate() {
                let s = t.shape();
                for i in 0..s[0] {
                    for j in 0..s[1] {
                        for k in 0..s[2] {
                            let at = ((r * top[0] + i) * top[1] + j) * top[2] + k;
                            want[at] = t.as_slice()[(i * s[1] + j) * s[2] + k];
                        }
                    }
                }
            }
            prop_assert_eq!(batch.shape(), [&[chunk.len()][..], &top[..]].concat());
            prop_assert_eq!(batch.as_slice(), &want[..]);
        }
    }

    #[test]
    fn unbatch_inverts_batch_of_tensors(
        shape in prop::collection::vec(0usize..4, 0..3),
        count in 0usize..12,
        n in 1usize..5,
        seed in any::<u64>(),
    ) {
        let len: usize = shape.iter().product();
        let xs: Vec<Tensor<f64>> = (0..count)
            .map(|i| tensor(&shape, (0..len).map(|j| (seed ^ (i * 31 + j) as u64) as f64).collect()))
            .collect();
        let back = collect(&from_vec(xs.clone()).batch(n, false).unbatch()).unwrap();
        prop_assert_eq!(back, xs);
    }
}
