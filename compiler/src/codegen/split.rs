//! The fixed-size columns of a batch filled by one generic rows function, on the calling
//! thread or split across the pipeline's pool (`__sl::rows`): the generated code's side
//! of the runtime's `stage/rows.rs` and `column/append.rs`.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

/// The columns `c_<name>` (element type, values a row) a rows function appends to.
pub(super) struct SplitColumns {
    cols: Vec<(Ident, TokenStream, TokenStream)>,
}

impl SplitColumns {
    /// Columns named `names`, of element types `types`, `per` values a row.
    pub(super) fn new(cols: impl IntoIterator<Item = (String, TokenStream, usize)>) -> SplitColumns {
        let cols =
            cols.into_iter().map(|(name, t, per)| (format_ident!("c_{}", name), t, quote!(#per))).collect();
        SplitColumns { cols }
    }

    /// The rows function's generic parameters (`C0: __sl::Append<f32>`, …) and its column
    /// arguments (`mut c_x: C0`, …), taken by value: `&mut Vec<T>` or a part.
    pub(super) fn signature(&self) -> (Vec<TokenStream>, Vec<TokenStream>) {
        self.cols
            .iter()
            .enumerate()
            .map(|(k, (c, t, _))| {
                let g = format_ident!("C{}", k);
                (quote!(#g: __sl::Append<#t>), quote!(mut #c: #g))
            })
            .unzip()
    }

    /// The statements that fill every column of a batch of `n` rows (declared empty, with
    /// room for them): `split_prelude`, then `call(true, parts)` for each part (its rows
    /// in `rows: Range<usize>`) when the pool takes the batch; else `call(false, &mut
    /// c_…)` once, for rows `0..n`. `call` makes the rows function's call.
    pub(super) fn fill(
        &self,
        split_prelude: TokenStream,
        call: impl Fn(bool, &[TokenStream]) -> TokenStream,
    ) -> TokenStream {
        let c: Vec<&Ident> = self.cols.iter().map(|(c, ..)| c).collect();
        let pers: Vec<&TokenStream> = self.cols.iter().map(|(_, _, per)| per).collect();
        let parts: Vec<Ident> = c.iter().map(|c| format_ident!("parts_{}", c)).collect();
        let filled: Vec<Ident> = c.iter().map(|c| format_ident!("filled_{}", c)).collect();
        // The parts of every column zipped, and the pattern that takes them apart.
        let (first, rest) = (&parts[0], &parts[1..]);
        let zipped = quote!(#first.into_iter() #(.zip(#rest))*);
        let c0 = c[0];
        let pattern = c[1..].iter().fold(quote!(#c0), |p, ci| quote!((#p, #ci)));
        let by_value: Vec<TokenStream> = c.iter().map(|c| quote!(#c)).collect();
        let by_ref: Vec<TokenStream> = c.iter().map(|c| quote!(&mut #c)).collect();
        let split_call = call(true, &by_value);
        let whole_call = call(false, &by_ref);
        quote! {
            if let ::std::option::Option::Some(split) = __sl::rows::split(n) {
                #split_prelude
                #(let (#parts, #filled) = split.column(&mut #c, #pers)?;)*
                split.run(#zipped, |rows, #pattern| #split_call)?;
                #(#filled.commit(&mut #c)?;)*
            } else {
                #whole_call?;
            }
        }
    }
}
