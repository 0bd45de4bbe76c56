//! The generator of `BucketByLengthExec`: the runtime `bucket_by_length` stage over
//! records of the input's type, the length read from its field, and one padding per
//! bucket (the padded batch types are `padded_batch`'s).

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use super::context::{Gen, R};
use super::types::field_ident;
use crate::ir::bucket::{BucketSpec, LengthOf};
use crate::ir::plan::FieldType;

impl Gen<'_> {
    /// `let ds = __sl::bucket_by_length(...)` for a `BucketByLengthExec` over records of
    /// `from`.
    pub(super) fn bucket(&mut self, from: &[FieldType], spec: &BucketSpec) -> R<TokenStream> {
        self.batch(from)?;
        let a = self.record(from)?;
        let id = field_ident(&spec.length);
        let length = match spec.length_of {
            LengthOf::Values => quote!(x.#id.len() as i64),
            LengthOf::Value => quote!(x.#id as i64),
        };
        let boundaries = spec
            .boundaries
            .iter()
            .map(|&b| i64::try_from(b).map(Literal::i64_suffixed).map_err(|_| "a bucket boundary beyond i64"))
            .collect::<Result<Vec<_>, _>>()?;
        let sizes = spec
            .batch_sizes
            .iter()
            .map(|&s| {
                usize::try_from(s)
                    .map(Literal::usize_unsuffixed)
                    .map_err(|_| "a batch size beyond this machine")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut paddings = Vec::new();
        for i in 0..spec.batch_sizes.len() {
            let boundary = spec.boundaries.get(i).copied().filter(|_| spec.pad_to_bucket_boundary);
            paddings.push(self.bucket_padding(from, boundary, &spec.padding_values)?);
        }
        let (pad, drop) = (spec.pad_to_bucket_boundary, spec.drop_remainder);
        Ok(quote! {
            let ds = __sl::bucket_by_length(
                ds,
                |x: &#a| #length,
                __sl::BucketOptions {
                    boundaries: ::std::vec![#(#boundaries),*],
                    batch_sizes: ::std::vec![#(#sizes),*],
                    pad_to_bucket_boundary: #pad,
                    drop_remainder: #drop,
                },
                ::std::vec![#(#paddings),*],
            );
        })
    }
}
