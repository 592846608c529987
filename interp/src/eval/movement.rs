//! Movement ops on row-major element lists. They are data-independent, so the same
//! functions move values and compute which buffer element a view element refers to.

use crate::ir::{Arg, Op};

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// Applies one movement op (already verified against `shape`) to `data`; `fill` is what
/// padding reads.
pub fn apply<T: Clone>(op: Op, arg: &Arg, shape: &[usize], data: &[T], fill: &T) -> Vec<T> {
    match (op, arg) {
        (Op::RESHAPE, _) => data.to_vec(),
        (Op::EXPAND, Arg::Shape(lead)) => {
            // An empty value stays empty however many times it is repeated.
            let times: usize = if data.is_empty() {
                0
            } else {
                lead.iter().product()
            };
            let mut out = Vec::with_capacity(times * data.len());
            for _ in 0..times {
                out.extend_from_slice(data);
            }
            out
        }
        (Op::PERMUTE, Arg::Perm(p)) => {
            let out_shape: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
            let in_st = strides(shape);
            let src_st: Vec<usize> = p.iter().map(|&i| in_st[i]).collect();
            gather(&out_shape, data, |idx| Some(dot(idx, &src_st)), fill)
        }
        (Op::PAD, Arg::Window { offsets, sizes }) => {
            let in_st = strides(shape);
            gather(
                sizes,
                data,
                |idx| {
                    let mut off = 0;
                    for ax in 0..idx.len() {
                        let i = idx[ax].checked_sub(offsets[ax])?;
                        if i >= shape[ax] {
                            return None;
                        }
                        off += i * in_st[ax];
                    }
                    Some(off)
                },
                fill,
            )
        }
        (Op::SHRINK, Arg::Window { offsets, sizes }) => {
            let in_st = strides(shape);
            let base = dot(offsets, &in_st);
            gather(sizes, data, |idx| Some(base + dot(idx, &in_st)), fill)
        }
        (Op::FLIP, Arg::Flip(flags)) => {
            let in_st = strides(shape);
            gather(
                shape,
                data,
                |idx| {
                    Some(
                        (0..idx.len())
                            .map(|ax| {
                                if flags[ax] {
                                    (shape[ax] - 1 - idx[ax]) * in_st[ax]
                                } else {
                                    idx[ax] * in_st[ax]
                                }
                            })
                            .sum(),
                    )
                },
                fill,
            )
        }
        _ => data.to_vec(),
    }
}

fn dot(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Builds a value of `out_shape` whose element at multi-index `idx` is `data[src(idx)]`, or
/// `fill` where `src` gives None.
fn gather<T: Clone>(
    out_shape: &[usize],
    data: &[T],
    src: impl Fn(&[usize]) -> Option<usize>,
    fill: &T,
) -> Vec<T> {
    let n: usize = out_shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; out_shape.len()];
    for _ in 0..n {
        out.push(match src(&idx) {
            Some(i) => data[i].clone(),
            None => fill.clone(),
        });
        for ax in (0..idx.len()).rev() {
            idx[ax] += 1;
            if idx[ax] < out_shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_pad_shrink_flip() {
        // [[0,1,2],[3,4,5]]
        let d: Vec<i32> = (0..6).collect();
        assert_eq!(
            apply(Op::PERMUTE, &Arg::Perm(vec![1, 0]), &[2, 3], &d, &-1),
            vec![0, 3, 1, 4, 2, 5]
        );
        let pad = Arg::Window {
            offsets: vec![0, 1],
            sizes: vec![2, 5],
        };
        assert_eq!(
            apply(Op::PAD, &pad, &[2, 3], &d, &-1),
            vec![-1, 0, 1, 2, -1, -1, 3, 4, 5, -1]
        );
        let shr = Arg::Window {
            offsets: vec![1, 1],
            sizes: vec![1, 2],
        };
        assert_eq!(apply(Op::SHRINK, &shr, &[2, 3], &d, &-1), vec![4, 5]);
        assert_eq!(
            apply(Op::FLIP, &Arg::Flip(vec![true, false]), &[2, 3], &d, &-1),
            vec![3, 4, 5, 0, 1, 2]
        );
        assert_eq!(
            apply(Op::EXPAND, &Arg::Shape(vec![2]), &[3], &d[..3], &-1),
            vec![0, 1, 2, 0, 1, 2]
        );
    }
}
