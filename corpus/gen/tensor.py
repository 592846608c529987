"""A tiny row-major tensor (shape + flat list of raw values) with the IR's movement and
reduction conventions written out index by index, for deriving expected values.

Conventions (docs/ir.md): EXPAND prepends dims; PAD/SHRINK take per-axis (offset, size);
PERMUTE out dim i = in dim perm[i]; REDUCE reduces the first n axes with a sequential left fold
in row-major order of the reduced elements.
"""

import itertools

import numerics as N


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def strides(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return list(reversed(st))


def indices(shape):
    return itertools.product(*[range(d) for d in shape])


class T:
    def __init__(self, shape, data, dtype):
        self.shape = list(shape)
        self.data = list(data)
        self.dtype = dtype
        assert prod(self.shape) == len(self.data), (shape, len(data))

    def at(self, idx):
        return self.data[sum(i * s for i, s in zip(idx, strides(self.shape)))]

    def reshape(self, shape):
        assert prod(shape) == len(self.data)
        return T(shape, self.data, self.dtype)

    def expand(self, lead):
        return T(list(lead) + self.shape, self.data * prod(lead), self.dtype)

    def permute(self, perm):
        shape = [self.shape[p] for p in perm]
        out = []
        for idx in indices(shape):
            src = [0] * len(perm)
            for i, p in enumerate(perm):
                src[p] = idx[i]
            out.append(self.at(src))
        return T(shape, out, self.dtype)

    def pad(self, offsets, sizes, zero):
        out = []
        for idx in indices(sizes):
            src = [i - o for i, o in zip(idx, offsets)]
            if all(0 <= s < d for s, d in zip(src, self.shape)):
                out.append(self.at(src))
            else:
                out.append(zero)
        return T(sizes, out, self.dtype)

    def shrink(self, offsets, sizes):
        for o, s, d in zip(offsets, sizes, self.shape):
            assert 0 <= o and o + s <= d
        out = [self.at([i + o for i, o in zip(idx, offsets)]) for idx in indices(sizes)]
        return T(sizes, out, self.dtype)

    def flip(self, axes):
        out = [self.at([d - 1 - i if f else i for i, d, f in zip(idx, self.shape, axes)])
               for idx in indices(self.shape)]
        return T(self.shape, out, self.dtype)

    def reduce(self, op, n):
        """Reduce the first n axes: acc starts at the op's identity (0, 1, the lowest value) and
        acc = op(acc, x) in row-major order of the reduced index (what tinygrad's kernels do)."""
        red, keep = self.shape[:n], self.shape[n:]
        out = []
        for j in indices(keep):
            acc = N.reduce_identity(op, self.dtype)
            for i in indices(red):
                x = self.at(list(i) + list(j))
                acc = N.alu(op, self.dtype, acc, x)
            out.append(acc)
        return T(keep, out, self.dtype)

    def map(self, fn, dtype=None):
        return T(self.shape, [fn(x) for x in self.data], dtype or self.dtype)


def zip_map(fn, *ts, dtype=None):
    for t in ts[1:]:
        assert t.shape == ts[0].shape
    return T(ts[0].shape, [fn(*xs) for xs in zip(*[t.data for t in ts])], dtype or ts[0].dtype)


def concat(ts, axis):
    """Concatenate along axis (for UNSHARD)."""
    base = ts[0].shape
    shape = list(base)
    shape[axis] = sum(t.shape[axis] for t in ts)
    out = []
    for idx in indices(shape):
        k = idx[axis]
        for t in ts:
            if k < t.shape[axis]:
                src = list(idx)
                src[axis] = k
                out.append(t.at(src))
                break
            k -= t.shape[axis]
    return T(shape, out, ts[0].dtype)


def splitmix64(seed, count, lo, hi):
    """docs/case-format.md's prng input: element i is lo + z_i mod (hi - lo + 1), where z_i is the
    (i+1)-th SplitMix64 output from state = seed."""
    M = (1 << 64) - 1
    state = seed & M
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & M
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        z ^= z >> 31
        out.append(lo + z % (hi - lo + 1))
    return out
