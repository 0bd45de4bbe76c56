//! Statements fused into one pass that writes a batch column (or a local) directly:
//! arithmetic over one field's values, `decode_raw` → `reshape` → arithmetic, and
//! `decode_jpeg` → `resize` → `scale` → `normalize`. Each gives the same values, errors
//! and bits as its statements one by one ([`Scope::statement`]).

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::super::types::{Repr, fixed_dims, repr, scalar};
use super::{R, Scope, local};
use crate::ir::expr::{Expr, ExprKind};
use crate::ir::fusion::{JpegRun, jpeg_run};
use crate::ir::op::Op;
use crate::ir::plan::{FieldType, MapOp};
use crate::ir::types::TensorType;

impl Scope<'_> {
    /// A tensor arithmetic statement over one field (`cast(image, f32) / 255.0`) whose
    /// value is a whole row of batch column `c_<into>`: each value appended to the column
    /// as it is computed (`ops::put_map`, the same closure as `Array::map`, so the same
    /// bits), with no tensor made in between. `None` when `e` is not such a statement.
    pub fn elementwise_into(
        &mut self,
        target: &str,
        e: &Expr,
        ty: &TensorType,
        into: &str,
    ) -> R<Option<TokenStream>> {
        if !matches!(e.kind, ExprKind::Binary(..) | ExprKind::Unary(..)) || repr(ty)? != Repr::Tensor {
            return Ok(None);
        }
        let Some(per) = fixed_dims(ty).map(|d| d.iter().product::<usize>()) else {
            return Ok(None);
        };
        let mut leaves: Vec<Expr> = Vec::new();
        self.collect_leaves(e, &mut leaves)?;
        let [leaf] = leaves.as_slice() else { return Ok(None) };
        if self.field_path(leaf).is_none() {
            return Ok(None);
        }
        let lt = self.tensor_ty(leaf)?;
        let saved = self.fallible;
        self.fallible = false;
        let body = self.scalar_with(e, ty.dtype, &leaves, &[lt.dtype])?;
        let fallible = self.fallible;
        self.fallible = saved;
        if fallible {
            return Ok(None);
        }
        self.movable = (e.count_reads(target) == 1).then(|| target.to_string());
        let owned = self.owned(leaf)?;
        self.movable = None;
        match self.fields.iter_mut().find(|f| f.name == target) {
            Some(f) => f.ty = Some(ty.clone()),
            None => self.fields.push(FieldType { name: target.to_string(), ty: Some(ty.clone()) }),
        }
        let (c, st, out) = (format_ident!("c_{}", into), scalar(lt.dtype), scalar(ty.dtype));
        Ok(Some(quote! {
            {
                let __a0 = #owned;
                __sl::ops::put_map(&mut #c, &__a0, #per, #into, |__v0: #st| -> #out { #body })?;
            }
        }))
    }

    /// The first [`raw_run`](crate::ir::fusion::raw_run) `n` statements of `ops`, the last ones of column
    /// `into`'s field: the values decoded from the record's bytes straight into the
    /// column (`ops::put_raw_map`), with no vector or tensor made in between; the same
    /// checks in the same order with the same messages, and the same closure (so the same
    /// bits) as the statements one by one. `None` when the arithmetic is not one loop
    /// over the values (the statements then run one by one).
    pub fn raw_into(&mut self, ops: &[MapOp], n: usize, into: &str) -> R<Option<TokenStream>> {
        let (
            Some(MapOp::Assign { value: e0, .. }),
            Some(MapOp::Assign { value: e1, ty: shaped, .. }),
            Some(MapOp::Assign { target, ty: last, .. }),
        ) = (ops.first(), ops.get(1), ops.get(n - 1))
        else {
            return Ok(None);
        };
        let (Some(Op::DecodeRaw { bytes, .. }), Some(Op::Reshape { dims, .. })) = (e0.op(), e1.op()) else {
            return Ok(None);
        };
        let Some(per) = fixed_dims(last).map(|d| d.iter().product::<usize>()) else {
            return Ok(None);
        };
        let raw = self.tensor_ty(e0)?.dtype;
        let bytes = self.bytes(bytes)?;
        let saved = self.fields.clone();
        let set = |fields: &mut Vec<FieldType>, ty: &TensorType| match fields
            .iter_mut()
            .find(|f| &f.name == target)
        {
            Some(f) => f.ty = Some(ty.clone()),
            None => fields.push(FieldType { name: target.clone(), ty: Some(ty.clone()) }),
        };
        set(&mut self.fields, shaped);
        let body = match ops.get(2).filter(|_| n == 3) {
            Some(MapOp::Assign { value: e, ty, .. }) => {
                let mut leaves: Vec<Expr> = Vec::new();
                self.collect_leaves(e, &mut leaves)?;
                let fallible = self.fallible;
                self.fallible = false;
                let body = match leaves.as_slice() {
                    [leaf] if leaf.field() == Some(target.as_str()) => {
                        Some(self.scalar_with(e, ty.dtype, &leaves, &[raw])?)
                    }
                    _ => None,
                };
                let loop_is_fallible = self.fallible;
                self.fallible = fallible;
                match body {
                    Some(b) if !loop_is_fallible => b,
                    _ => {
                        self.fields = saved;
                        return Ok(None);
                    }
                }
            }
            _ => quote!(__v0),
        };
        set(&mut self.fields, last);
        let (c, st, out) = (format_ident!("c_{}", into), scalar(raw), scalar(last.dtype));
        let dims = dims.iter().map(|n| Literal::usize_suffixed(*n as usize));
        Ok(Some(quote! {
            __sl::ops::put_raw_map(&mut #c, #bytes, &[#(#dims),*], #per, #into, |__v0: #st| -> #out { #body })?;
        }))
    }

    /// `decode_jpeg(b, 3)`, `resize(h, w)`, `scale(1/255)`, `normalize(mean, std)` on
    /// one field in a row: one fused pass (`ops::decode_resize_normalize_into`,
    /// bit-identical to the four steps), or `None` when `ops` does not start so.
    /// With `into`, the pixels are appended to that field's column `c_<into>` instead
    /// of making a local.
    pub fn decode_resize_normalize(&mut self, ops: &[MapOp], into: Option<&str>) -> R<Option<TokenStream>> {
        let Some(JpegRun { target, bytes, max_pixels, h, w, mean, std, ty }) = jpeg_run(ops) else {
            return Ok(None);
        };
        let bytes = self.bytes(bytes)?;
        let h = self.count(h)?;
        let w = self.count(w)?;
        let mean = self.floats(mean)?;
        let std = self.floats(std)?;
        let name = local(target);
        match self.fields.iter_mut().find(|f| f.name == target) {
            Some(f) => f.ty = Some(ty.clone()),
            None => self.fields.push(FieldType { name: target.to_string(), ty: Some(ty.clone()) }),
        }
        // With `max_pixels`, the same pass checking the header against it.
        let decode = |out: TokenStream| match max_pixels {
            None => quote! {
                __sl::ops::decode_resize_normalize_into(#bytes, h, w, &[#(#mean),*], &[#(#std),*], #out)?;
            },
            Some(n) => {
                let n = Literal::usize_suffixed(n as usize);
                quote! {
                    __sl::ops::decode_resize_normalize_limited_into(
                        #bytes, #n, h, w, &[#(#mean),*], &[#(#std),*], #out,
                    )?;
                }
            }
        };
        if let Some(field) = into {
            // Appended to the column: written once into its spare capacity.
            let c = format_ident!("c_{}", field);
            let limit = match max_pixels {
                None => quote!(::std::option::Option::None),
                Some(n) => {
                    let n = Literal::usize_suffixed(n as usize);
                    quote!(::std::option::Option::Some(#n))
                }
            };
            return Ok(Some(quote! {
                __sl::ops::decode_resize_normalize_extend(
                    #bytes, #limit, #h, #w, &[#(#mean),*], &[#(#std),*], &mut #c,
                )?;
            }));
        }
        let decode = decode(quote!(&mut v));
        Ok(Some(quote! {
            let #name: __sl::Tensor<f32> = {
                let (h, w) = (#h, #w);
                let mut v = ::std::vec![0f32; h * w * 3];
                #decode
                __sl::Tensor::new(::std::vec![h, w, 3], v)?
            };
        }))
    }
}
