"""Cross-check of soapflow's safetensors files against the reference implementation.

Run by tests/test_io_safetensors.c where Python's `safetensors` package (with numpy)
is importable; the test is skipped elsewhere.

    python3 st_crosscheck.py DIR

1. writes DIR/py-written.safetensors with the reference writer: tensors "w" (2x3,
   0..5), "b" (3, 0.5 1.5 2.5) and "s" (a scalar, -1), metadata {"step": "7"};
2. reads every other DIR/*.safetensors with the reference reader and prints, per
   file in name order, "ok NAME" or "refused NAME"; for an accepted file it also
   prints "tensor NAME TENSOR SHAPE SUM" lines (shape as 2x3, sum of the floats
   as %.9g) and "meta NAME KEY VALUE" lines, so the C side can compare.
"""
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file


def main(d):
    save_file(
        {
            "w": np.arange(6, dtype=np.float32).reshape(2, 3),
            "b": np.array([0.5, 1.5, 2.5], dtype=np.float32),
            "s": np.array(-1.0, dtype=np.float32),
        },
        os.path.join(d, "py-written.safetensors"),
        metadata={"step": "7"},
    )
    for name in sorted(os.listdir(d)):
        if not name.endswith(".safetensors") or name == "py-written.safetensors":
            continue
        lines = []
        try:
            with safe_open(os.path.join(d, name), framework="numpy") as f:
                for key in sorted(f.keys()):
                    t = f.get_tensor(key)
                    shape = "x".join(str(x) for x in t.shape) or "scalar"
                    lines.append("tensor %s %s %s %.9g" % (name, key, shape, float(t.astype(np.float64).sum())))
                for k, v in sorted((f.metadata() or {}).items()):
                    lines.append("meta %s %s %s" % (name, k, v))
        except Exception:  # any refusal: the C side compares refusals only
            print("refused %s" % name)
            continue
        print("ok %s" % name)
        for line in lines:
            print(line)


if __name__ == "__main__":
    main(sys.argv[1])
