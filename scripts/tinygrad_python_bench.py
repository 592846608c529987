"""tinygrad's PYTHON device on the two workloads the oracle's speed target names: a 256x256
float32 matmul and a 1M-element float32 x*y+x. Prints wall seconds for each (realize included).
Run: DEV=PYTHON python3 scripts/tinygrad_python_bench.py   (pip install tinygrad==0.14.0 numpy)
Compare with: cargo run --release -p uopkit-interp --example oracle_bench -- matmul 256
              cargo run --release -p uopkit-interp --example oracle_bench -- elementwise 1048576
"""
import os
import time

os.environ.setdefault("DEV", "PYTHON")
import numpy as np  # noqa: E402
from tinygrad import Tensor  # noqa: E402

rng = np.random.default_rng(0)
a = Tensor(rng.random((256, 256), dtype=np.float32)).realize()
b = Tensor(rng.random((256, 256), dtype=np.float32)).realize()
t = time.perf_counter()
(a @ b).realize()
print(f"matmul 256: {time.perf_counter() - t:.2f} s on {a.device}")
x = Tensor(rng.random(1 << 20, dtype=np.float32)).realize()
y = Tensor(rng.random(1 << 20, dtype=np.float32)).realize()
t = time.perf_counter()
(x * y + x).realize()
print(f"elementwise 1M: {time.perf_counter() - t:.2f} s on {x.device}")
