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
