//! Values as the oracle sees them: elements that are either bits or "never written".

use crate::ir::{DType, NodeId};

/// One element. `Uninit` is poison, like a memory sanitizer's shadow: it flows through
/// copies and arithmetic and is reported only when it reaches an output, carrying the
/// buffer element it came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Elem {
    Bits(u64),
    Uninit { buffer: NodeId, index: usize },
}

/// The elements of a value: one list for a single-device (or device-less) value, one per
/// device for a multi-device value. Row-major in the value's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Single(Vec<Elem>),
    Multi(Vec<Vec<Elem>>),
}

impl Data {
    /// The per-device components (one for a single value).
    pub fn components(&self) -> &[Vec<Elem>] {
        match self {
            Data::Single(v) => std::slice::from_ref(v),
            Data::Multi(vs) => vs,
        }
    }

    /// Applies `f` to every component, keeping the single/multi structure.
    pub fn map<E>(&self, mut f: impl FnMut(&[Elem]) -> Result<Vec<Elem>, E>) -> Result<Data, E> {
        Ok(match self {
            Data::Single(v) => Data::Single(f(v)?),
            Data::Multi(vs) => Data::Multi(vs.iter().map(|v| f(v)).collect::<Result<_, _>>()?),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Value {
    /// The first element that was never written, with its position (component, index).
    pub fn first_uninit(&self) -> Option<(usize, usize, Elem)> {
        self.data
            .components()
            .iter()
            .enumerate()
            .find_map(|(c, comp)| {
                comp.iter()
                    .position(|e| matches!(e, Elem::Uninit { .. }))
                    .map(|i| (c, i, comp[i]))
            })
    }
}

/// The poison word of an element that is defined (in [`Column`]'s poison list).
const DEFINED: u64 = u64::MAX;

fn pack_origin(buffer: NodeId, index: usize) -> u64 {
    // Buffers have at most `verify::MAX_ELEMENTS` (< 2^32) elements.
    (u64::from(buffer.0) << 32) | (index as u64 & 0xffff_ffff)
}

fn unpack_origin(w: u64) -> Elem {
    Elem::Uninit {
        buffer: NodeId((w >> 32) as u32),
        index: (w & 0xffff_ffff) as usize,
    }
}

/// Raw element bits, 4 bytes each for dtypes of up to 32 bits, 8 bytes for 64-bit dtypes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Words {
    W32(Vec<u32>),
    W64(Vec<u64>),
}

impl Words {
    /// Storage for `dt` with room for `n` words.
    pub fn with_capacity(dt: DType, n: usize) -> Words {
        if dt.bits() <= 32 {
            Words::W32(Vec::with_capacity(n))
        } else {
            Words::W64(Vec::with_capacity(n))
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Words::W32(v) => v.len(),
            Words::W64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        match self {
            Words::W32(v) => u64::from(v[i]),
            Words::W64(v) => v[i],
        }
    }

    #[inline]
    pub fn push(&mut self, b: u64) {
        match self {
            Words::W32(v) => v.push(b as u32),
            Words::W64(v) => v.push(b),
        }
    }

    #[inline]
    fn set(&mut self, i: usize, b: u64) {
        match self {
            Words::W32(v) => v[i] = b as u32,
            Words::W64(v) => v[i] = b,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Words::W32(v) => v.len() * 4,
            Words::W64(v) => v.len() * 8,
        }
    }

    fn map_vec(&self, f32: impl Fn(&[u32]) -> Vec<u32>, f64: impl Fn(&[u64]) -> Vec<u64>) -> Words {
        match self {
            Words::W32(v) => Words::W32(f32(v)),
            Words::W64(v) => Words::W64(f64(v)),
        }
    }
}

/// The elements of one component in the evaluator's compact form: raw bits, plus a poison
/// list only when some element was never written. A column may be a *splat*: one stored
/// element standing for `len` equal ones (a broadcast constant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    len: usize,
    /// `len` words, or one word for a splat.
    bits: Words,
    /// Per stored word: [`DEFINED`] or the packed origin (buffer, index) of a poison element.
    poison: Option<Vec<u64>>,
}

impl Default for Column {
    fn default() -> Self {
        Column::from_words(Words::W32(vec![]))
    }
}

impl Column {
    /// A column from raw bits.
    pub fn from_bits(dt: DType, bits: impl IntoIterator<Item = u64>) -> Column {
        let it = bits.into_iter();
        let mut w = Words::with_capacity(dt, it.size_hint().0);
        for b in it {
            w.push(b);
        }
        Column::from_words(w)
    }

    /// A column from 32-bit words (dtypes of up to 32 bits).
    pub fn from_u32(bits: Vec<u32>) -> Column {
        Column::from_words(Words::W32(bits))
    }

    /// A column from stored words (no poison).
    pub fn from_words(bits: Words) -> Column {
        Column {
            len: bits.len(),
            bits,
            poison: None,
        }
    }

    /// A column from elements.
    pub fn from_elems(dt: DType, elems: &[Elem]) -> Column {
        let mut bits = Words::with_capacity(dt, elems.len());
        let mut poison: Option<Vec<u64>> = None;
        for (i, e) in elems.iter().enumerate() {
            match *e {
                Elem::Bits(b) => {
                    bits.push(b);
                    if let Some(p) = &mut poison {
                        p.push(DEFINED);
                    }
                }
                Elem::Uninit { buffer, index } => {
                    bits.push(0);
                    let p = poison.get_or_insert_with(|| {
                        let mut p = Vec::with_capacity(elems.len());
                        p.resize(i, DEFINED);
                        p
                    });
                    p.push(pack_origin(buffer, index));
                }
            }
        }
        Column {
            len: elems.len(),
            bits,
            poison,
        }
    }

    /// `len` copies of one element, stored once.
    pub fn splat(dt: DType, len: usize, e: Elem) -> Column {
        let mut c = Column::from_elems(dt, &[e]);
        c.len = len;
        if len == 0 {
            c = Column::from_elems(dt, &[]);
        }
        c
    }

    /// Every element never written, element i coming from element i of `buffer`.
    pub fn uninit(dt: DType, buffer: NodeId, len: usize) -> Column {
        let bits = if dt.bits() <= 32 {
            Words::W32(vec![0; len])
        } else {
            Words::W64(vec![0; len])
        };
        Column {
            len,
            bits,
            poison: Some((0..len).map(|i| pack_origin(buffer, i)).collect()),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the stored words are not one per element: a splat (one word for all) or a
    /// repeat (the stored words over and over: an EXPAND of a value).
    pub fn is_splat(&self) -> bool {
        self.bits.len() != self.len
    }

    /// Whether the stored words repeat with a period of more than one element.
    pub(crate) fn is_repeat(&self) -> bool {
        self.is_splat() && self.bits.len() > 1
    }

    /// The stored words (one for a splat).
    pub fn words(&self) -> &Words {
        &self.bits
    }

    /// Whether some element is poison.
    pub fn has_poison(&self) -> bool {
        self.poison.is_some()
    }

    /// The stride of element i in the stored words (0 for a splat; not for a repeat).
    #[inline]
    pub(crate) fn stride(&self) -> usize {
        usize::from(!self.is_splat())
    }

    /// The stored word of element i.
    #[inline]
    fn slot(&self, i: usize) -> usize {
        if self.is_splat() {
            i % self.bits.len()
        } else {
            i
        }
    }

    /// Element `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Elem {
        let j = self.slot(i);
        match &self.poison {
            Some(p) if p[j] != DEFINED => unpack_origin(p[j]),
            _ => Elem::Bits(self.bits.get(j)),
        }
    }

    /// The first poison element and its index.
    pub fn first_poison(&self) -> Option<(usize, Elem)> {
        let p = self.poison.as_ref()?;
        let j = p.iter().position(|&w| w != DEFINED)?;
        if self.len == 0 {
            return None;
        }
        Some((j, unpack_origin(p[j])))
    }

    /// All elements as [`Elem`]s (the public form).
    pub fn to_elems(&self) -> Vec<Elem> {
        (0..self.len).map(|i| self.get(i)).collect()
    }

    /// Bytes this column holds.
    pub fn bytes(&self) -> usize {
        self.bits.bytes() + self.poison.as_ref().map_or(0, |p| p.len() * 8)
    }

    /// [`Column::dense`] of an owned column: a dense one is returned as it is (no copy).
    pub(crate) fn into_dense(self) -> Column {
        if self.is_splat() {
            self.dense()
        } else {
            self
        }
    }

    /// A dense copy (a splat expanded).
    pub(crate) fn dense(&self) -> Column {
        if !self.is_splat() {
            return self.clone();
        }
        let times = self.len / self.bits.len().max(1);
        let bits = self.bits.map_vec(|v| v.repeat(times), |v| v.repeat(times));
        Column {
            len: self.len,
            bits,
            poison: self.poison.as_ref().map(|p| p.repeat(times)),
        }
    }

    /// Applies one movement op (already verified against `shape`); padding reads zero.
    pub(crate) fn movement(
        &self,
        op: crate::ir::Op,
        arg: &crate::ir::Arg,
        shape: &[usize],
        out_len: usize,
    ) -> Column {
        use crate::ir::Op;
        if op == Op::RESHAPE {
            let mut c = self.clone();
            c.len = out_len;
            return c;
        }
        if op == Op::EXPAND || (self.is_splat() && !self.is_repeat() && op != Op::PAD) {
            // EXPAND prepends axes: element i is element i mod (source length), so the stored
            // words repeat (their period divides the source length).
            let mut c = self.clone();
            c.len = out_len;
            if out_len == 0 {
                c.bits = c.bits.map_vec(|_| vec![], |_| vec![]);
                c.poison = c.poison.map(|_| vec![]);
            }
            return c;
        }
        if self.is_repeat() {
            if let Some(c) = self.repeat_movement(op, arg, shape) {
                return c;
            }
        }
        let d = self.dense();
        let bits = d.bits.map_vec(
            |v| super::movement::apply(op, arg, shape, v, &0),
            |v| super::movement::apply(op, arg, shape, v, &0),
        );
        let poison = d
            .poison
            .as_ref()
            .map(|p| super::movement::apply(op, arg, shape, p, &DEFINED))
            .filter(|p| p.iter().any(|&w| w != DEFINED));
        Column {
            len: bits.len(),
            bits,
            poison,
        }
    }

    /// PERMUTE/SHRINK/FLIP of a repeat whose period is the size of a suffix of `shape`'s
    /// axes: the leading axes then only select a repetition, so the result gathers from the
    /// stored words directly with those axes' strides taken as 0 (no dense copy first).
    fn repeat_movement(
        &self,
        op: crate::ir::Op,
        arg: &crate::ir::Arg,
        shape: &[usize],
    ) -> Option<Column> {
        let p = self.bits.len();
        let k = (0..=shape.len()).find(|&k| shape[k..].iter().product::<usize>() == p)?;
        let bits = match &self.bits {
            Words::W32(v) => Words::W32(super::movement::apply_periodic(op, arg, shape, k, v)?),
            Words::W64(v) => Words::W64(super::movement::apply_periodic(op, arg, shape, k, v)?),
        };
        let poison = match &self.poison {
            Some(q) => Some(super::movement::apply_periodic(op, arg, shape, k, q)?),
            None => None,
        }
        .filter(|q| q.iter().any(|&w| w != DEFINED));
        Some(Column {
            len: bits.len(),
            bits,
            poison,
        })
    }

    /// The elements at `idx` (a view's buffer elements).
    pub(crate) fn gather(&self, idx: &[u32]) -> Column {
        let slot = |i: u32| self.slot(i as usize);
        let bits = self.bits.map_vec(
            |v| idx.iter().map(|&i| v[slot(i)]).collect(),
            |v| idx.iter().map(|&i| v[slot(i)]).collect(),
        );
        let poison = self.poison.as_ref().and_then(|p| {
            let q: Vec<u64> = idx.iter().map(|&i| p[slot(i)]).collect();
            q.iter().any(|&w| w != DEFINED).then_some(q)
        });
        Column {
            len: idx.len(),
            bits,
            poison,
        }
    }

    /// Writes element `e` at `i` (a dense column).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, e: Elem) {
        match e {
            Elem::Bits(b) => {
                self.bits.set(i, b);
                if let Some(p) = &mut self.poison {
                    p[i] = DEFINED;
                }
            }
            Elem::Uninit { buffer, index } => {
                let n = self.bits.len();
                self.poison.get_or_insert_with(|| vec![DEFINED; n])[i] = pack_origin(buffer, index);
            }
        }
    }

    /// Drops the poison list when nothing in it is poison any more.
    pub(crate) fn tidy(&mut self) {
        if self
            .poison
            .as_ref()
            .is_some_and(|p| p.iter().all(|&w| w == DEFINED))
        {
            self.poison = None;
        }
    }

    /// The same stored element(s) standing for `len` elements (a column of one stored
    /// element becomes a splat).
    pub(crate) fn splat_to(mut self, len: usize) -> Column {
        if len == 0 {
            return Column {
                len: 0,
                bits: self.bits.map_vec(|_| vec![], |_| vec![]),
                poison: None,
            };
        }
        self.len = len;
        self
    }

    /// [`Column::build`] for a function that cannot fail.
    pub(crate) fn build_with(dt: DType, len: usize, mut f: impl FnMut(usize) -> Elem) -> Column {
        match Column::build::<std::convert::Infallible>(dt, len, |i| Ok(f(i))) {
            Ok(c) => c,
            Err(e) => match e {},
        }
    }

    /// Builds a column of `len` elements from a function of the index (poison allowed).
    pub(crate) fn build<E>(
        dt: DType,
        len: usize,
        mut f: impl FnMut(usize) -> Result<Elem, E>,
    ) -> Result<Column, E> {
        let mut bits = Words::with_capacity(dt, len);
        let mut poison: Option<Vec<u64>> = None;
        for i in 0..len {
            match f(i)? {
                Elem::Bits(b) => {
                    bits.push(b);
                    if let Some(p) = &mut poison {
                        p.push(DEFINED);
                    }
                }
                Elem::Uninit { buffer, index } => {
                    bits.push(0);
                    let p = poison.get_or_insert_with(|| {
                        let mut p = Vec::with_capacity(len);
                        p.resize(i, DEFINED);
                        p
                    });
                    p.push(pack_origin(buffer, index));
                }
            }
        }
        Ok(Column { len, bits, poison })
    }
}

/// A value in the evaluator's compact form: per-device components shared by reference
/// (a COPY to many devices or a RESHAPE does not copy elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compact {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Whether this is a multi-device value (then `comps` has one column per device).
    pub multi: bool,
    pub comps: Vec<std::rc::Rc<Column>>,
}

impl Compact {
    /// The public form (one [`Elem`] per element).
    pub fn to_value(&self) -> Value {
        let data = if self.multi {
            Data::Multi(self.comps.iter().map(|c| c.to_elems()).collect())
        } else {
            Data::Single(self.comps.first().map(|c| c.to_elems()).unwrap_or_default())
        };
        Value {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        }
    }

    /// The first element that was never written: (component, index, element).
    pub fn first_uninit(&self) -> Option<(usize, usize, Elem)> {
        self.comps
            .iter()
            .enumerate()
            .find_map(|(c, col)| col.first_poison().map(|(i, e)| (c, i, e)))
    }

    /// Bytes the components hold (shared components counted once per reference).
    pub fn bytes(&self) -> usize {
        self.comps.iter().map(|c| c.bytes()).sum()
    }
}
