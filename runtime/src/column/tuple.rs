//! Tuples of batchables (arity 1 to 4) batch into tuples of columns, field by field, the
//! way generated code batches a record struct; fields are named by their position.

use super::{Batchable, ColumnBuilder, ColumnError, Columns, check_rows};

macro_rules! tuple {
    ($(($t:ident, $i:tt)),+) => {
        impl<$($t: Columns),+> Columns for ($($t,)+) {
            type Row = ($($t::Row,)+);

            fn num_rows(&self) -> Result<usize, ColumnError> {
                check_rows(&[$((
                    stringify!($i),
                    self.$i.num_rows().map_err(|e| e.in_field(stringify!($i)))?,
                )),+])
            }

            #[inline]
            fn row(&self, i: usize) -> Self::Row {
                ($(self.$i.row(i),)+)
            }
        }

        impl<$($t: ColumnBuilder),+> ColumnBuilder for ($($t,)+) {
            type Item = ($($t::Item,)+);
            type Columns = ($($t::Columns,)+);

            #[inline]
            fn push(&mut self, x: Self::Item) -> Result<(), ColumnError> {
                $(self.$i.push(x.$i).map_err(|e| e.in_field(stringify!($i)))?;)+
                Ok(())
            }

            fn finish(self) -> Self::Columns {
                ($(self.$i.finish(),)+)
            }
        }

        impl<$($t: Batchable),+> Batchable for ($($t,)+) {
            type Columns = ($($t::Columns,)+);
            type Builder = ($($t::Builder,)+);
            type Padding = ($($t::Padding,)+);
            type Padded = ($($t::Padded,)+);
            type PaddedBuilder = ($($t::PaddedBuilder,)+);

            fn builder(capacity: usize) -> Self::Builder {
                ($($t::builder(capacity),)+)
            }

            fn padded_builder(capacity: usize, padding: &Self::Padding) -> Self::PaddedBuilder {
                ($($t::padded_builder(capacity, &padding.$i),)+)
            }
        }
    };
}
tuple!((A, 0));
tuple!((A, 0), (B, 1));
tuple!((A, 0), (B, 1), (C, 2));
tuple!((A, 0), (B, 1), (C, 2), (D, 3));
