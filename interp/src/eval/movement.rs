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
            let src_st: Vec<isize> = p.iter().map(|&i| in_st[i] as isize).collect();
            strided(&out_shape, &src_st, 0, data)
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
            let st: Vec<isize> = in_st.iter().map(|&s| s as isize).collect();
            strided(sizes, &st, base as isize, data)
        }
        (Op::FLIP, Arg::Flip(flags)) => {
            let in_st = strides(shape);
            let mut base = 0isize;
            let st: Vec<isize> = (0..shape.len())
                .map(|ax| {
                    if flags[ax] {
                        base += (shape[ax].saturating_sub(1) * in_st[ax]) as isize;
                        -(in_st[ax] as isize)
                    } else {
                        in_st[ax] as isize
                    }
                })
                .collect();
            strided(shape, &st, base, data)
        }
        _ => data.to_vec(),
    }
}

/// PERMUTE, SHRINK or FLIP (verified against `shape`) of a value whose elements repeat with
/// period `data.len() = Π shape[k..]`: element i of the value is `data[i mod period]`, so the
/// leading `k` axes do not move within `data` (their strides are taken as 0). None for other
/// ops.
pub fn apply_periodic<T: Clone>(
    op: Op,
    arg: &Arg,
    shape: &[usize],
    k: usize,
    data: &[T],
) -> Option<Vec<T>> {
    let in_st: Vec<isize> = strides(shape)
        .iter()
        .enumerate()
        .map(|(ax, &s)| if ax < k { 0 } else { s as isize })
        .collect();
    match (op, arg) {
        (Op::PERMUTE, Arg::Perm(p)) => {
            let out_shape: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
            let src_st: Vec<isize> = p.iter().map(|&i| in_st[i]).collect();
            Some(strided(&out_shape, &src_st, 0, data))
        }
        (Op::SHRINK, Arg::Window { offsets, sizes }) => {
            let base: isize = offsets
                .iter()
                .zip(&in_st)
                .map(|(&o, &s)| o as isize * s)
                .sum();
            Some(strided(sizes, &in_st, base, data))
        }
        (Op::FLIP, Arg::Flip(flags)) => {
            let mut base = 0isize;
            let st: Vec<isize> = (0..shape.len())
                .map(|ax| {
                    if flags[ax] {
                        base += shape[ax].saturating_sub(1) as isize * in_st[ax];
                        -in_st[ax]
                    } else {
                        in_st[ax]
                    }
                })
                .collect();
            Some(strided(shape, &st, base, data))
        }
        _ => None,
    }
}

fn dot(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Builds a value of `out_shape` whose element at multi-index `idx` is
/// `data[base + Σ idx[ax]·st[ax]]` (every such offset is in bounds: the movement op was
/// verified). The innermost axis is a plain strided loop.
fn strided<T: Clone>(out_shape: &[usize], st: &[isize], base: isize, data: &[T]) -> Vec<T> {
    let n: usize = out_shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let Some((&inner, outer_shape)) = out_shape.split_last() else {
        out.push(data[base as usize].clone());
        return out;
    };
    let s_in = st[st.len() - 1];
    let outer_st = &st[..st.len() - 1];
    let mut idx = vec![0usize; outer_shape.len()];
    let mut off = base;
    for _ in 0..n / inner {
        if s_in == 1 {
            out.extend_from_slice(&data[off as usize..off as usize + inner]);
        } else {
            let mut o = off;
            for _ in 0..inner {
                out.push(data[o as usize].clone());
                o += s_in;
            }
        }
        for ax in (0..idx.len()).rev() {
            idx[ax] += 1;
            off += outer_st[ax];
            if idx[ax] < outer_shape[ax] {
                break;
            }
            off -= outer_st[ax] * outer_shape[ax] as isize;
            idx[ax] = 0;
        }
    }
    out
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

    /// The strided gathers against the definition (element at idx = data[src(idx)]) on many
    /// shapes, permutations, windows and flips, including empty and size-1 axes.
    #[test]
    fn strided_gathers_match_the_definition() {
        let mut seed = 7u64;
        let mut rnd = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n.max(1)
        };
        for _ in 0..400 {
            let rank = rnd(4) + 1;
            let shape: Vec<usize> = (0..rank).map(|_| rnd(4)).collect();
            let n: usize = shape.iter().product();
            let d: Vec<u32> = (0..n as u32).collect();
            let st = strides(&shape);
            // PERMUTE
            let mut p: Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                p.swap(i, rnd(i + 1));
            }
            let out_shape: Vec<usize> = p.iter().map(|&i| shape[i]).collect();
            let src_st: Vec<usize> = p.iter().map(|&i| st[i]).collect();
            let want = gather(&out_shape, &d, |idx| Some(dot(idx, &src_st)), &0);
            assert_eq!(
                apply(Op::PERMUTE, &Arg::Perm(p.clone()), &shape, &d, &0),
                want
            );
            // FLIP
            let flags: Vec<bool> = (0..rank).map(|_| rnd(2) == 1).collect();
            let want = gather(
                &shape,
                &d,
                |idx| {
                    Some(
                        (0..rank)
                            .map(|ax| {
                                if flags[ax] {
                                    (shape[ax] - 1 - idx[ax]) * st[ax]
                                } else {
                                    idx[ax] * st[ax]
                                }
                            })
                            .sum(),
                    )
                },
                &0,
            );
            assert_eq!(apply(Op::FLIP, &Arg::Flip(flags), &shape, &d, &0), want);
            // SHRINK
            let offsets: Vec<usize> = shape.iter().map(|&s| rnd(s + 1).min(s)).collect();
            let sizes: Vec<usize> = shape
                .iter()
                .zip(&offsets)
                .map(|(&s, &o)| rnd(s - o + 1))
                .collect();
            let base = dot(&offsets, &st);
            let want = gather(&sizes, &d, |idx| Some(base + dot(idx, &st)), &0);
            let w = Arg::Window { offsets, sizes };
            assert_eq!(apply(Op::SHRINK, &w, &shape, &d, &0), want);
        }
    }
}
