//! Records of a layout already seen, parsed by comparing their bytes.
//!
//! A dataset's records usually share a layout: the same features in the same order, with
//! the same encoding and lengths; only the values differ (tabular rows, fixed-size
//! tensors, ids). [`Layouts`] keeps the layout of a record a generated batch parser
//! walked in full and found well formed: its bytes, and a mask of the bits the walk did
//! not branch on. A later record of the same length whose other bits all equal the
//! learned record's takes the same path through the walk (every branch of it reads only
//! those bits: keys, lengths, names, the continuation bits of varints) and succeeds with
//! its values in the same places, so they are read from there, unwalked.
//!
//! The walk is the generated one (`codegen/parser.rs`): [`ExampleView::entries`], which
//! checks each map entry's framing and name but skips its `value` unread, then the
//! declared features' values read through their usual packed encoding
//! ([`Entry::packed`], whose payload is a [`Span`]). So what may differ from the learned
//! record is:
//! - the `value` of an entry whose value the walk did not read (an undeclared feature, or
//!   a declared one that a later entry of the same name replaced): all its bytes;
//! - in a packed `float_list` read as `f32`s: every bit of the payload (each 4 bytes are
//!   an `f32`, whatever they hold);
//! - in a packed `int64_list` read as `i64`s: the 7 value bits of each varint byte. The
//!   continuation bits, which end each varint, must be equal, and the last byte of a
//!   10-byte varint must still be 0 or 1 (more is an overflow the walk rejects).
//!
//! Every other bit must be equal. A record that differs anywhere else is walked in full,
//! as it would be without a layout: the values, the errors and their messages are the
//! walk's in every case.

use super::view::{Entry, ExampleView};
use crate::column::Append;

/// Where a declared feature's values lie in a record, `record[start..end]`, and how
/// they are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
    encoding: Encoding,
}

/// How the values in a [`Span`] are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Little-endian 4-byte values (a packed `float_list`).
    Fixed32,
    /// Varints (a packed `int64_list`).
    Varints,
}

/// A value type read from a learned layout: one whose every encoded value decodes
/// without a check on the value itself (`f32`, `i64`; not the range-checked integers).
pub trait SpanValue: Sized {
    /// The encoding of its list.
    const ENCODING: Encoding;
    /// The field number of its list in a `tf.train.Feature`.
    const LIST_FIELD: u32;
    /// Appends the `n` values in `bytes`, a span of a record that matched a learned
    /// layout (so `bytes` holds exactly `n` well-formed values).
    fn extend_span(bytes: &[u8], n: usize, out: &mut impl Append<Self>);
}

impl SpanValue for f32 {
    const ENCODING: Encoding = Encoding::Fixed32;
    const LIST_FIELD: u32 = 2;
    #[inline]
    fn extend_span(bytes: &[u8], n: usize, out: &mut impl Append<f32>) {
        extend_f32s(&bytes[..bytes.len().min(4 * n)], out);
    }
}

impl SpanValue for i64 {
    const ENCODING: Encoding = Encoding::Varints;
    const LIST_FIELD: u32 = 3;
    #[inline]
    fn extend_span(bytes: &[u8], n: usize, out: &mut impl Append<i64>) {
        out.reserve(n);
        let (mut v, mut shift) = (0u64, 0u32);
        for &b in bytes {
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b < 0x80 {
                out.push(v as i64);
                (v, shift) = (0, 0);
            } else {
                shift += 7;
            }
        }
    }
}

/// Appends the little-endian `f32`s of `bytes` (whole values only) to `out`.
#[inline]
pub(crate) fn extend_f32s(bytes: &[u8], out: &mut impl Append<f32>) {
    let n = bytes.len() / 4;
    let spare = out.room(n);
    #[cfg(target_endian = "little")]
    // SAFETY: `spare` has room for `n` f32s, `4 * n` bytes, which `bytes` holds; on a
    // little-endian target an f32's bytes in memory are its wire bytes (what
    // `from_le_bytes` reads), and every bit pattern is an f32. The two do not overlap
    // (`spare` is the column's unused capacity).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), spare.as_mut_ptr().cast::<u8>(), 4 * n)
    };
    #[cfg(not(target_endian = "little"))]
    for (slot, c) in spare.iter_mut().zip(bytes.chunks_exact(4)) {
        slot.write(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    // SAFETY: all `n` slots were written.
    unsafe { out.advance(n) };
}

/// The span of `T` values a walk read from `entry` of `record`: its usual packed
/// encoding ([`Entry::packed`]) holding exactly `n` well-formed values, as the walk's
/// fast path reads it. `None` for any other encoding (the layout is then not learned).
#[inline]
pub fn span<T: SpanValue>(record: &[u8], entry: &Option<Entry<'_>>, n: usize) -> Option<Span> {
    let bytes = entry.as_ref()?.packed(T::LIST_FIELD)?;
    let whole = match T::ENCODING {
        Encoding::Fixed32 => bytes.len() == 4 * n,
        Encoding::Varints => varint_ends(bytes).is_some_and(|ends| ends.count() == n),
    };
    let start = (bytes.as_ptr() as usize).checked_sub(record.as_ptr() as usize)?;
    let end = start + bytes.len();
    (whole && end <= record.len()).then_some(Span { start, end, encoding: T::ENCODING })
}

/// The index of the last byte of each varint of `bytes`, or `None` unless `bytes` is
/// whole well-formed varints (each at most 10 bytes, a 10th byte 0 or 1).
fn varint_ends(bytes: &[u8]) -> Option<impl Iterator<Item = usize> + '_> {
    let mut len = 0;
    for &b in bytes {
        len += 1;
        if len == 10 && b > 1 {
            return None;
        }
        if b < 0x80 {
            len = 0;
        }
    }
    (len == 0).then(|| bytes.iter().enumerate().filter(|(_, b)| **b < 0x80).map(|(i, _)| i))
}

/// The layouts a batch's parser learned, up to 8 at a time; see the module
/// documentation. `K` is the number of declared features.
#[derive(Debug)]
pub struct Layouts<const K: usize> {
    learned: Vec<Learned<K>>,
    /// The slot the next new layout replaces, once all are taken.
    next: usize,
    hits: u32,
    misses: u32,
    /// The mask being learned (kept to reuse its allocation).
    mask: Vec<u8>,
    /// Set when records rarely match (layouts that keep changing): the parser then only
    /// walks, without learning.
    off: bool,
}

/// How many layouts are kept at once: varint-encoded labels of a few sizes give a few
/// lengths, a writer that does not sort a map's keys a few orders of the features.
const WAYS: usize = 8;

/// Records shorter than a word are walked (the walk is short too).
const MIN_LEN: usize = 8;

#[derive(Debug)]
struct Learned<const K: usize> {
    len: usize,
    /// The words to compare, `record[at..at + 8]` as a little-endian `u64`: its bits in
    /// `mask` must be those of `want`.
    checks: Vec<Check>,
    spans: [Span; K],
}

#[derive(Debug, Clone, Copy)]
struct Check {
    at: usize,
    mask: u64,
    want: u64,
}

impl<const K: usize> Default for Layouts<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const K: usize> Layouts<K> {
    /// None learned yet.
    pub fn new() -> Self {
        Layouts { learned: Vec::new(), next: 0, hits: 0, misses: 0, mask: Vec::new(), off: false }
    }

    /// The spans of `record`'s declared features when it has a learned layout, `None`
    /// when it must be walked.
    #[inline]
    pub fn find(&mut self, record: &[u8]) -> Option<[Span; K]> {
        if self.off {
            return None;
        }
        if let Some(l) = self.learned.iter().find(|l| l.len == record.len() && l.matches(record)) {
            self.hits += 1;
            return Some(l.spans);
        }
        self.misses += 1;
        // Learning costs a few walks, a match saves most of one: learn on while records
        // of the learned layouts outnumber the others by 4 to 1.
        if self.misses >= 16 && self.hits < 4 * self.misses {
            self.off = true;
        }
        None
    }

    /// Learns the layout of `record`, which the walk just parsed in full without error,
    /// reading each declared feature's values at `spans` (`None`: read otherwise, and
    /// then the layout is not learned).
    pub fn learn(&mut self, record: &[u8], spans: [Option<Span>; K]) {
        if self.off || record.len() < MIN_LEN {
            return;
        }
        let mut found = [Span { start: 0, end: 0, encoding: Encoding::Fixed32 }; K];
        for (slot, span) in found.iter_mut().zip(spans) {
            let Some(span) = span else { return };
            *slot = span;
        }
        let mask = &mut self.mask;
        mask.clear();
        mask.resize(record.len(), 0xff);
        // The values the walk skipped: each entry's, but those it read the spans from.
        for entry in ExampleView::new(record).entries() {
            let Ok(entry) = entry else { return };
            if let Some(value) = entry.value_range()
                && !found.iter().any(|s| value.start <= s.start && s.end <= value.end)
                && let Some(m) = mask.get_mut(value)
            {
                m.fill(0);
            }
        }
        for span in found {
            let (Some(bytes), Some(m)) =
                (record.get(span.start..span.end), mask.get_mut(span.start..span.end))
            else {
                return;
            };
            match (span.encoding, varint_ends(bytes)) {
                (Encoding::Fixed32, _) => m.fill(0),
                (Encoding::Varints, Some(ends)) => {
                    m.fill(0x80);
                    let mut from = 0;
                    for end in ends {
                        if end - from == 9 {
                            m[end] = 0xfe;
                        }
                        from = end + 1;
                    }
                }
                (Encoding::Varints, None) => return,
            }
        }
        let len = record.len();
        let word = |b: &[u8], at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let starts = (0..len / 8).map(|i| 8 * i).chain((!len.is_multiple_of(8)).then_some(len - 8));
        let checks = starts
            .map(|at| {
                let mask = word(&self.mask, at);
                Check { at, mask, want: word(record, at) & mask }
            })
            .filter(|c| c.mask != 0)
            .collect();
        let learned = Learned { len, checks, spans: found };
        if self.learned.len() < WAYS {
            self.learned.push(learned);
        } else {
            self.learned[self.next] = learned;
            self.next = (self.next + 1) % WAYS;
        }
    }
}

impl<const K: usize> Learned<K> {
    /// Whether `record` (of this layout's length) has the learned bits.
    #[inline]
    fn matches(&self, record: &[u8]) -> bool {
        self.checks.iter().all(|c| {
            record
                .get(c.at..c.at + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .is_some_and(|w| u64::from_le_bytes(w) & c.mask == c.want)
        })
    }
}

/// Appends the `n` values of `T` in `span` of `record` (from [`Layouts::find`]).
#[inline]
pub fn from_span<T: SpanValue>(record: &[u8], span: Span, n: usize, out: &mut impl Append<T>) {
    T::extend_span(record.get(span.start..span.end).unwrap_or_default(), n, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::parse::{self, ParseError};
    use crate::example::view::ExampleView;
    use crate::example::{Example, Feature};
    use crate::rng::Philox;

    type Values = (Vec<u32>, Vec<i64>);

    /// A generated batch parser's walk of `x: f32[16], label: i64`: the values (the
    /// floats' bits) and the spans it would learn.
    fn walk(record: &[u8]) -> Result<(Values, [Option<Span>; 2]), ParseError> {
        let (mut x, mut label) = (Vec::new(), Vec::new());
        let (mut e_x, mut e_label) = (None, None);
        for entry in ExampleView::new(record).entries() {
            let entry = entry.map_err(parse::malformed)?;
            match entry.name() {
                "x" => e_x = Some(entry),
                "label" => e_label = Some(entry),
                _ => {}
            }
        }
        parse::fixed::<f32>("x", e_x, 16, None, &mut x)?;
        parse::fixed::<i64>("label", e_label, 1, None, &mut label)?;
        let spans = [span::<f32>(record, &e_x, 16), span::<i64>(record, &e_label, 1)];
        Ok(((x.iter().map(|v| v.to_bits()).collect(), label), spans))
    }

    /// What the generated parser does with `record`: its layout's values, else the walk's
    /// (learning the layout when it succeeds); and whether the layout was used.
    fn parse(layouts: &mut Layouts<2>, record: &[u8]) -> (Result<Values, ParseError>, bool) {
        if let Some(at) = layouts.find(record) {
            let (mut x, mut label) = (Vec::new(), Vec::new());
            from_span::<f32>(record, at[0], 16, &mut x);
            from_span::<i64>(record, at[1], 1, &mut label);
            return (Ok((x.iter().map(|v| v.to_bits()).collect(), label)), true);
        }
        let walked = walk(record).map(|(values, spans)| {
            layouts.learn(record, spans);
            values
        });
        (walked, false)
    }

    /// Labels whose varints are 1 to 10 bytes long.
    const LABELS: [i64; 10] = [5, 300, 70_000, 1 << 22, 1 << 29, 1 << 36, 1 << 43, 1 << 50, 1 << 57, -3];

    fn record(rng: &mut Philox, label: i64, extra: Option<&[u8]>) -> Vec<u8> {
        let x: Vec<f32> = (0..16).map(|_| f32::from_bits(rng.next_u64() as u32)).collect();
        let mut features =
            vec![("x".to_string(), Feature::floats(x)), ("label".to_string(), Feature::int64s([label]))];
        if let Some(extra) = extra {
            // Undeclared: an id (of random varint bits, 3 bytes) and bytes.
            features
                .push(("id".to_string(), Feature::int64s([(1 << 14) + (rng.next_u64() % (1 << 20)) as i64])));
            let mut extra = extra.to_vec();
            extra.iter_mut().for_each(|b| *b ^= rng.next_u64() as u8);
            features.push(("name".to_string(), Feature::bytes([extra])));
        }
        Example::from_features(features).encode_record()
    }

    #[test]
    fn records_of_a_learned_layout_give_the_values_of_the_walk() {
        let mut rng = Philox::new(0x5eed, 0);
        let mut layouts = Layouts::<2>::new();
        let mut used = 0;
        for i in 0..2000 {
            // Runs of one label size, then another: several layouts at once.
            let label = LABELS[(i / 50) % LABELS.len()] + (rng.next_u64() % 3) as i64;
            let r = record(&mut rng, label, Some(b"same length"));
            let (got, fast) = parse(&mut layouts, &r);
            assert_eq!(got.unwrap(), walk(&r).unwrap().0, "record {i}");
            used += usize::from(fast);
        }
        assert!(used > 1900, "the layouts read {used} of 2000 records");
    }

    #[test]
    fn a_record_differing_in_a_bit_the_walk_reads_is_walked() {
        let mut rng = Philox::new(7, 0);
        let (mut fast, mut walked, mut failed) = (0, 0, 0);
        for &label in &LABELS {
            let learned = record(&mut rng, label, Some(b"abc"));
            for _ in 0..3000 {
                let mut layouts = Layouts::<2>::new();
                assert!(!parse(&mut layouts, &learned).1);
                let mut r = learned.clone();
                for _ in 0..1 + rng.below(3) as usize {
                    let at = rng.below(r.len() as u32) as usize;
                    r[at] ^= 1 << rng.below(8);
                }
                let (got, used) = parse(&mut layouts, &r);
                match walk(&r) {
                    Ok((values, _)) => assert_eq!(got.unwrap(), values, "{r:?}"),
                    Err(e) => {
                        assert!(!used, "{r:?} is malformed ({e}) but matched the layout");
                        assert_eq!(got.unwrap_err().to_string(), e.to_string());
                        failed += 1;
                    }
                }
                if used { fast += 1 } else { walked += 1 }
            }
        }
        // Flips in the values (most of the record) keep the layout; flips elsewhere
        // walk, and some of those records are malformed.
        assert!(fast > 10_000 && walked > 5_000 && failed > 1_000, "{fast} {walked} {failed}");
    }

    fn field(key: u8, body: &[u8]) -> Vec<u8> {
        [&[key, body.len() as u8][..], body].concat()
    }

    /// A record of `x: [i; 16]`, `label: [label]` and an undeclared `id`, its three
    /// map entries in the order `order` gives.
    fn ordered(i: u8, label: u8, order: [usize; 3]) -> Vec<u8> {
        let floats: Vec<u8> = (0..16).flat_map(|_| f32::from(i).to_le_bytes()).collect();
        let entries = [
            [field(0x0a, b"x"), field(0x12, &field(0x12, &field(0x0a, &floats)))].concat(),
            [field(0x0a, b"label"), field(0x12, &field(0x1a, &field(0x0a, &[label])))].concat(),
            [field(0x0a, b"id"), field(0x12, &field(0x1a, &field(0x0a, &[i])))].concat(),
        ];
        field(0x0a, &order.iter().flat_map(|&k| field(0x0a, &entries[k])).collect::<Vec<u8>>())
    }

    #[test]
    fn features_in_several_orders_are_several_layouts() {
        let orders = [[0, 1, 2], [2, 1, 0], [1, 0, 2], [0, 2, 1], [1, 2, 0], [2, 0, 1]];
        let mut layouts = Layouts::<2>::new();
        let mut used = 0;
        for i in 0..120u8 {
            let r = ordered(i, i % 100, orders[usize::from(i) % orders.len()]);
            let (got, fast) = parse(&mut layouts, &r);
            let want = walk(&r).unwrap().0;
            assert_eq!(got.unwrap(), want);
            assert_eq!(want.1, [i64::from(i % 100)]);
            used += usize::from(fast);
        }
        assert_eq!((used, layouts.learned.len()), (120 - orders.len(), orders.len()));
    }

    #[test]
    fn a_ten_byte_varint_keeps_its_last_byte_at_0_or_1() {
        let mut rng = Philox::new(11, 0);
        let learned = record(&mut rng, -3, None);
        let mut layouts = Layouts::<2>::new();
        assert!(parse(&mut layouts, &learned).0.is_ok());
        let (_, [_, Some(label)]) = walk(&learned).unwrap() else { panic!("no label span") };
        let last = label.end - 1;
        for (byte, matches) in [(0u8, true), (1, true), (2, false), (0x81, false)] {
            let mut r = learned.clone();
            r[last] = byte;
            assert_eq!(layouts.find(&r).is_some(), matches, "last byte {byte:#x}");
            assert_eq!(walk(&r).is_ok(), matches, "last byte {byte:#x}");
        }
    }

    #[test]
    fn unpacked_lists_are_walked_and_changing_layouts_stop_the_learning() {
        // An unpacked int64_list (each value with its own key): no span, nothing learned.
        let floats: Vec<u8> = (0..16u8).flat_map(|i| f32::from(i).to_le_bytes()).collect();
        let x = [field(0x0a, b"x"), field(0x12, &field(0x12, &field(0x0a, &floats)))].concat();
        let label = [field(0x0a, b"label"), field(0x12, &field(0x1a, &[0x08, 0x09]))].concat();
        let unpacked = field(0x0a, &[field(0x0a, &x), field(0x0a, &label)].concat());
        let mut layouts = Layouts::<2>::new();
        for _ in 0..3 {
            let (got, used) = parse(&mut layouts, &unpacked);
            assert!(!used);
            assert_eq!(got.unwrap().1, [9]);
        }
        assert_eq!(
            walk(&unpacked).unwrap().1,
            [Some(Span { start: 13, end: 77, encoding: Encoding::Fixed32 }), None]
        );
        assert!(layouts.learned.is_empty());

        // Every record of its own layout (a bytes feature of a new length each time).
        let mut rng = Philox::new(3, 0);
        let mut layouts = Layouts::<2>::new();
        for i in 0..200 {
            let extra = vec![b'a'; i];
            let r = record(&mut rng, 1, Some(&extra));
            let (got, used) = parse(&mut layouts, &r);
            assert!(!used);
            assert_eq!(got.unwrap(), walk(&r).unwrap().0);
        }
        assert!(layouts.off, "200 misses in a row turn learning off");
        assert!(layouts.learned.len() <= WAYS);
    }
}
