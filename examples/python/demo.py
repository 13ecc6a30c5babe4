"""Export a small CNN to a .kiln program, run it with kiln, and compare with eager PyTorch.

    python examples/python/demo.py OUT_DIR

Writes OUT_DIR/model.kiln, OUT_DIR/input.bin (the raw float32 input that
examples/cpp/hello reads) and OUT_DIR/output.bin (kiln's output, which
scripts/demo.sh compares with the C++ run's), and prints the output.
"""

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

import kiln
from kiln.export import export


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = y + torch.relu(self.conv2(y))  # residual
        y = self.pool(y)
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.head(y), dim=-1)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/demo")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.randn(1, 3, 32, 32)

    report = export(model, (x,), out / "model.kiln")
    print(report)

    program = kiln.load(out / "model.kiln")
    method = program.method("forward")
    print(method)
    (result,) = method.run(x.numpy())
    with torch.no_grad():
        expected = model(x).numpy()
    x.numpy().astype(np.float32).tofile(out / "input.bin")
    result.astype(np.float32).tofile(out / "output.bin")

    print("--- Python (kiln.load) ---")
    # Summed in double precision, as examples/cpp/hello sums, so the two lines can be compared.
    print(f"output 0 float32{list(result.shape)} sum={result.astype(np.float64).sum():.9g}")
    print("  values", " ".join(f"{v:.9g}" for v in result.ravel()[:8]), "...")
    print(f"max abs difference from eager PyTorch: {np.abs(result - expected).max():.3g}")


if __name__ == "__main__":
    main()
