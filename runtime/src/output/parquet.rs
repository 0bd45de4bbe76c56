//! `--format parquet`: each element one row of a Parquet file, each field one column,
//! written with the `parquet` crate's `ArrowWriter` (feature `parquet`).
//!
//! The columns are the first element's fields, in its order; every later element must
//! have the same fields of the same types (an error names the record and field). Types:
//! numbers as Arrow's own (`u8` → `uint8`, `f64` → `double`, `bool` → `bool`), `str` as
//! `string`, `bytes` as `binary`, a list `T[]` as `list<T>`, a tensor `T[a, b]` as
//! `fixed_size_list<T>[a·b]`, row-major, with its shape in the field's metadata
//! (`sluice.shape`: `[a, b]`; every element's must be the same). No value is null.
//! `parquet(files)` reads such a file back with the same schema.
//!
//! Rows are buffered column by column and written as a row group when `row_group` of them
//! or about 64 MiB are buffered, so memory is bounded by one row group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int8Array,
    Int16Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, UInt8Array, UInt16Array,
    UInt32Array, UInt64Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::ParquetCompression;
use crate::abi::export::{Features, FieldValue, Nums, Shape};
use crate::error::{Error, Result};
use crate::storage::PartialFile;

/// Bytes of buffered values that end a row group before `row_group` rows do.
const ROW_GROUP_BYTES: usize = 64 << 20;
/// The most values (or bytes) a column of one row group holds: its offsets are `i32`.
const MAX_VALUES: usize = i32::MAX as usize;

/// The values (or bytes) `value` adds to its column.
fn value_len(value: &FieldValue) -> usize {
    match value {
        FieldValue::Nums(n, _) => n.len(),
        FieldValue::Bytes(b) => b.len(),
        FieldValue::Text(t) => t.len(),
    }
}

/// One Parquet file being written.
pub struct ParquetShard {
    /// The file until the first row group makes the writer (the schema is the first row's).
    file: Option<PartialFile>,
    writer: Option<ArrowWriter<PartialFile>>,
    columns: Vec<Column>,
    schema: Option<SchemaRef>,
    rows: usize,
    bytes: usize,
    row_group: usize,
    compression: ParquetCompression,
    path: PathBuf,
}

impl std::fmt::Debug for ParquetShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetShard").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A column's buffered values.
struct Column {
    name: String,
    /// The first row's value of this field: its type (and a tensor's shape), for the
    /// schema and to check each later row against.
    first: FieldValue,
    values: Values,
    /// Per row: where its values end (lists, bytes and strings).
    offsets: Vec<i32>,
}

enum Values {
    Nums(Nums),
    Bytes(Vec<u8>),
}

impl ParquetShard {
    /// Starts the file `path` (`PATH.partial` until finished).
    pub fn create(path: &Path, compression: ParquetCompression, row_group: usize) -> Result<ParquetShard> {
        let file = PartialFile::create(path).map_err(|e| Error::io(path, e))?;
        Ok(ParquetShard {
            file: Some(file),
            writer: None,
            columns: Vec::new(),
            schema: None,
            rows: 0,
            bytes: 0,
            row_group: row_group.max(1),
            compression,
            path: path.to_path_buf(),
        })
    }

    fn fail(&self, message: String) -> Error {
        Error::Table { path: self.path.clone(), message }
    }

    /// Buffers the row of element `index`'s `fields`, writing a row group when one is full.
    pub fn write(&mut self, fields: Features, index: u64) -> Result<()> {
        if self.schema.is_none() {
            self.start(&fields, index)?;
        }
        if fields.fields.len() != self.columns.len()
            || fields.fields.iter().zip(&self.columns).any(|((n, _), c)| *n != c.name)
        {
            let names =
                |it: &mut dyn Iterator<Item = &String>| it.map(String::as_str).collect::<Vec<_>>().join(", ");
            return Err(self.fail(format!(
                "record {index} has the fields ({}), the first record had ({}): a Parquet file has one set of columns",
                names(&mut fields.fields.iter().map(|(n, _)| n)),
                names(&mut self.columns.iter().map(|c| &c.name)),
            )));
        }
        // Checked before any column takes its value, so that the columns stay aligned.
        let mut flush_first = false;
        for ((name, value), c) in fields.fields.iter().zip(&self.columns) {
            if !same_type(value, &c.first) {
                return Err(self.fail(format!(
                    "record {index}: field `{name}` is {}, the first record's was {}: a Parquet column has one type",
                    value.type_name(),
                    c.first.type_name()
                )));
            }
            // A column's offsets are 32-bit: at most 2^31 - 1 values (or bytes) a row group.
            let len = value_len(value);
            if len > MAX_VALUES {
                return Err(self.fail(format!(
                    "record {index}: field `{name}` holds {len} values or bytes, more than a Parquet row holds (2^31 - 1)"
                )));
            }
            flush_first |= c.len() + len > MAX_VALUES;
        }
        if flush_first {
            self.flush()?;
        }
        for (c, (_, value)) in self.columns.iter_mut().zip(fields.fields) {
            self.bytes += c.push(value);
        }
        self.rows += 1;
        if self.rows >= self.row_group || self.bytes >= ROW_GROUP_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// The columns and schema of the first row.
    fn start(&mut self, fields: &Features, index: u64) -> Result<()> {
        let mut seen = HashMap::new();
        let mut arrow_fields = Vec::with_capacity(fields.fields.len());
        for (name, value) in &fields.fields {
            if seen.insert(name.as_str(), ()).is_some() {
                return Err(self.fail(format!("record {index}: field `{name}` twice")));
            }
            let field = Field::new(name, data_type(value), false);
            arrow_fields.push(match value {
                FieldValue::Nums(_, Shape::Tensor(d)) => field.with_metadata(HashMap::from([(
                    "sluice.shape".to_string(),
                    format!("[{}]", d.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
                )])),
                _ => field,
            });
            let values = match value {
                FieldValue::Nums(n, _) => Values::Nums(n.empty_like()),
                _ => Values::Bytes(Vec::new()),
            };
            self.columns.push(Column { name: name.clone(), first: value.clone(), values, offsets: vec![0] });
        }
        self.schema = Some(Arc::new(Schema::new(arrow_fields)));
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<()> {
        let Some(schema) = self.schema.clone() else { return Ok(()) };
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(Column::take).collect();
        let batch = RecordBatch::try_new(schema.clone(), arrays)
            .map_err(|e| self.fail(format!("cannot make a row group: {e}")))?;
        if self.writer.is_none() {
            let props = WriterProperties::builder()
                .set_compression(match self.compression {
                    ParquetCompression::None => Compression::UNCOMPRESSED,
                    ParquetCompression::Snappy => Compression::SNAPPY,
                    ParquetCompression::Zstd => Compression::ZSTD(ZstdLevel::default()),
                    ParquetCompression::Gzip => Compression::GZIP(GzipLevel::default()),
                    ParquetCompression::Lz4 => Compression::LZ4_RAW,
                })
                .set_max_row_group_row_count(Some(self.row_group))
                .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
                .build();
            let file = self.file.take().expect("the file until the writer");
            let w = ArrowWriter::try_new(file, schema, Some(props)).map_err(|e| self.fail(e.to_string()))?;
            self.writer = Some(w);
        }
        let w = self.writer.as_mut().expect("made above");
        let written = w.write(&batch).and_then(|()| w.flush());
        written.map_err(|e| Error::Table { path: self.path.clone(), message: e.to_string() })?;
        self.rows = 0;
        self.bytes = 0;
        Ok(())
    }

    /// Writes the last row group and the footer, and renames the file into place. A pass
    /// without elements gives a file of no columns and no rows.
    pub fn finish(mut self) -> Result<()> {
        self.flush()?;
        let file = match self.writer.take() {
            Some(w) => w.into_inner().map_err(|e| self.fail(e.to_string()))?,
            None => {
                let file = self.file.take().expect("no writer: the file");
                let schema = self.schema.clone().unwrap_or_else(|| Arc::new(Schema::empty()));
                let w = ArrowWriter::try_new(file, schema, None).map_err(|e| self.fail(e.to_string()))?;
                w.into_inner().map_err(|e| self.fail(e.to_string()))?
            }
        };
        file.finish().map_err(|e| Error::io(&self.path, e))
    }
}

/// Whether `a` and `b` are fields of one type (and a tensor of one shape).
fn same_type(a: &FieldValue, b: &FieldValue) -> bool {
    match (a, b) {
        (FieldValue::Nums(x, s), FieldValue::Nums(y, t)) => x.dtype() == y.dtype() && s == t,
        (FieldValue::Bytes(_), FieldValue::Bytes(_)) | (FieldValue::Text(_), FieldValue::Text(_)) => true,
        _ => false,
    }
}

fn data_type(value: &FieldValue) -> DataType {
    match value {
        FieldValue::Bytes(_) => DataType::Binary,
        FieldValue::Text(_) => DataType::Utf8,
        FieldValue::Nums(n, shape) => {
            let item = match n {
                Nums::U8(_) => DataType::UInt8,
                Nums::I8(_) => DataType::Int8,
                Nums::U16(_) => DataType::UInt16,
                Nums::I16(_) => DataType::Int16,
                Nums::U32(_) => DataType::UInt32,
                Nums::I32(_) => DataType::Int32,
                Nums::U64(_) => DataType::UInt64,
                Nums::I64(_) => DataType::Int64,
                Nums::F32(_) => DataType::Float32,
                Nums::F64(_) => DataType::Float64,
                Nums::Bool(_) => DataType::Boolean,
            };
            match shape {
                Shape::Scalar => item,
                Shape::List => DataType::List(Arc::new(Field::new_list_field(item, false))),
                Shape::Tensor(d) => DataType::FixedSizeList(
                    Arc::new(Field::new_list_field(item, false)),
                    d.iter().product::<usize>() as i32,
                ),
            }
        }
    }
}

/// Appends `from` to `to` (of the same variant: checked by the caller); gives the bytes.
fn append(to: &mut Nums, from: Nums) -> usize {
    macro_rules! cat {
        ($($v:ident),*) => {
            match (to, from) {
                $((Nums::$v(a), Nums::$v(b)) => { let n = size_of_val(&b[..]); a.extend(b); n })*
                _ => 0,
            }
        };
    }
    cat!(U8, I8, U16, I16, U32, I32, U64, I64, F32, F64, Bool)
}

/// `n` as an Arrow array (emptied).
fn array(n: &mut Nums) -> ArrayRef {
    let n = std::mem::replace(n, n.empty_like());
    match n {
        Nums::U8(v) => Arc::new(UInt8Array::from(v)),
        Nums::I8(v) => Arc::new(Int8Array::from(v)),
        Nums::U16(v) => Arc::new(UInt16Array::from(v)),
        Nums::I16(v) => Arc::new(Int16Array::from(v)),
        Nums::U32(v) => Arc::new(UInt32Array::from(v)),
        Nums::I32(v) => Arc::new(Int32Array::from(v)),
        Nums::U64(v) => Arc::new(UInt64Array::from(v)),
        Nums::I64(v) => Arc::new(Int64Array::from(v)),
        Nums::F32(v) => Arc::new(Float32Array::from(v)),
        Nums::F64(v) => Arc::new(Float64Array::from(v)),
        Nums::Bool(v) => Arc::new(BooleanArray::from(v)),
    }
}

impl Column {
    /// The values (or bytes) buffered.
    fn len(&self) -> usize {
        match &self.values {
            Values::Nums(n) => n.len(),
            Values::Bytes(b) => b.len(),
        }
    }

    /// Buffers one row's value (of this column's type; its length checked to fit the
    /// offsets); gives its bytes.
    fn push(&mut self, value: FieldValue) -> usize {
        match (&mut self.values, value) {
            (Values::Nums(to), FieldValue::Nums(from, _)) => {
                let bytes = append(to, from);
                self.offsets.push(to.len() as i32);
                bytes
            }
            (Values::Bytes(to), FieldValue::Bytes(b)) => {
                to.extend_from_slice(&b);
                self.offsets.push(to.len() as i32);
                b.len()
            }
            (Values::Bytes(to), FieldValue::Text(t)) => {
                to.extend_from_slice(t.as_bytes());
                self.offsets.push(to.len() as i32);
                t.len()
            }
            _ => 0,
        }
    }

    /// The buffered rows as an array; the buffers start again empty.
    fn take(&mut self) -> ArrayRef {
        let offsets = std::mem::replace(&mut self.offsets, vec![0]);
        let item = |n: &Nums| {
            Arc::new(Field::new_list_field(
                data_type(&FieldValue::Nums(n.empty_like(), Shape::Scalar)),
                false,
            ))
        };
        match (&mut self.values, &self.first) {
            (Values::Nums(n), FieldValue::Nums(_, Shape::Scalar)) => array(n),
            (Values::Nums(n), FieldValue::Nums(_, Shape::List)) => {
                let field = item(n);
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                Arc::new(ListArray::new(field, offsets, array(n), None))
            }
            (Values::Nums(n), FieldValue::Nums(_, Shape::Tensor(d))) => {
                let field = item(n);
                let rows = offsets.len() - 1;
                let size = d.iter().product::<usize>() as i32;
                Arc::new(
                    FixedSizeListArray::try_new_with_length(field, size, array(n), None, rows)
                        .expect("every row holds the tensor's values: checked as it was buffered"),
                )
            }
            (Values::Bytes(b), first) => {
                let data = Buffer::from_vec(std::mem::take(b));
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                match first {
                    // Whole `String`s: valid UTF-8 between every two offsets.
                    FieldValue::Text(_) => Arc::new(StringArray::new(offsets, data, None)),
                    _ => Arc::new(BinaryArray::new(offsets, data, None)),
                }
            }
            (Values::Nums(_), _) => unreachable!("a numeric column's first value is numeric"),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type, Int64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::abi::export;
    use crate::column::Tensor;

    fn row(i: i64) -> Features {
        let mut f = Features::new();
        export::scalar(&mut f, "id", &i);
        export::scalar(&mut f, "score", &(i as f64 / 4.0));
        export::tensor(&mut f, "x", &Tensor::new(vec![2, 2], vec![i as f32; 4]).unwrap());
        export::list(&mut f, "tokens", &vec![i; i as usize % 3]);
        export::text(&mut f, "name", &format!("n{i}"));
        export::bytes(&mut f, "blob", &[i as u8; 2]);
        f
    }

    #[test]
    fn rows_read_back_with_their_types_in_row_groups_of_the_size_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut w = ParquetShard::create(&path, ParquetCompression::Zstd, 2).unwrap();
        for i in 0..5 {
            w.write(row(i), i as u64).unwrap();
        }
        assert!(!path.exists(), "the file appears only when finished");
        w.finish().unwrap();
        let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(b.metadata().num_row_groups(), 3);
        let schema = b.schema().clone();
        let types: Vec<String> = schema.fields().iter().map(|f| f.data_type().to_string()).collect();
        assert_eq!(types[..2], ["Int64", "Float64"]);
        assert!(types[2].starts_with("FixedSizeList") && types[2].contains("Float32"), "{}", types[2]);
        assert!(types[3].starts_with("List") && types[3].contains("Int64"), "{}", types[3]);
        assert_eq!(types[4..], ["Utf8", "Binary"]);
        assert_eq!(schema.field(2).metadata()["sluice.shape"], "[2, 2]");
        let batches: Vec<RecordBatch> = b.build().unwrap().map(|b| b.unwrap()).collect();
        let all = arrow_select_concat(&batches);
        assert_eq!(all.0, [0, 1, 2, 3, 4]);
        assert_eq!(all.1, [0.0, 0.25, 0.5, 0.75, 1.0]);
        let last = batches.last().unwrap();
        let r = last.num_rows() - 1; // row 4
        let x = last.column(2).as_fixed_size_list();
        assert_eq!(x.value(r).as_primitive::<Float32Type>().values(), &[4.0; 4]);
        let tokens = last.column(3).as_list::<i32>();
        assert_eq!(tokens.value(r).as_primitive::<Int64Type>().values(), &[4]);
        assert_eq!(tokens.value(r - 1).as_primitive::<Int64Type>().values(), &[3; 0]);
        assert_eq!(last.column(4).as_string::<i32>().value(r), "n4");
        assert_eq!(last.column(5).as_binary::<i32>().value(r), &[4, 4]);
    }

    fn arrow_select_concat(batches: &[RecordBatch]) -> (Vec<i64>, Vec<f64>) {
        let mut ids = Vec::new();
        let mut scores = Vec::new();
        for b in batches {
            ids.extend(b.column(0).as_primitive::<Int64Type>().values().iter());
            scores.extend(b.column(1).as_primitive::<Float64Type>().values().iter());
        }
        (ids, scores)
    }

    #[test]
    fn a_row_of_another_type_or_shape_is_an_error_naming_record_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut w = ParquetShard::create(&path, ParquetCompression::Snappy, 100).unwrap();
        w.write(row(0), 0).unwrap();
        let mut f = row(1);
        export::tensor(&mut f, "x", &Tensor::new(vec![4], vec![1.0f32; 4]).unwrap());
        let e = w.write(f, 1).unwrap_err().to_string();
        assert!(e.ends_with("t.parquet: record 1: field `x` is f32[4], the first record's was f32[2, 2]: a Parquet column has one type"), "{e}");
        let mut f = Features::new();
        export::scalar(&mut f, "id", &1i64);
        let e = w.write(f, 2).unwrap_err().to_string();
        assert!(
            e.contains(
                "record 2 has the fields (id), the first record had (id, score, x, tokens, name, blob)"
            ),
            "{e}"
        );
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partial file is gone");
    }

    #[test]
    fn an_empty_pass_is_a_file_without_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.parquet");
        ParquetShard::create(&path, ParquetCompression::None, 10).unwrap().finish().unwrap();
        let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(b.metadata().file_metadata().num_rows(), 0);
    }
}
