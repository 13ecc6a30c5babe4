"""The custom operator kiln_demo::scaled_tanh, declared for PyTorch and for export.

    kiln_demo::scaled_tanh(Tensor x, float scale=1., *, float offset=0.) -> Tensor
    y = tanh(scale * x) + offset

* `torch.library.custom_op` declares the operator; the decorated function is
  the reference implementation PyTorch runs in eager mode.
* `register_fake` says what the output looks like (shape, dtype) without
  computing it: torch.export traces with fake tensors and needs it.
* kiln.export keeps the call as one KernelCall to "kiln_demo::scaled_tanh",
  overload "default", with the arguments (x, scale, offset) in schema order.
  The kernel is in ../scaled_tanh.cpp.

    python -m kiln_demo.ops OUT_DIR      # exports OUT_DIR/demo.kiln and OUT_DIR/input.bin
"""

from __future__ import annotations

import torch

__all__ = ["scaled_tanh", "DemoModel", "export_demo"]


@torch.library.custom_op("kiln_demo::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float = 1.0, *, offset: float = 0.0) -> torch.Tensor:
    """tanh(scale * x) + offset (the eager reference; the kiln kernel must match it)."""
    return torch.tanh(x * scale) + offset


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float = 1.0, *, offset: float = 0.0) -> torch.Tensor:
    return torch.empty_like(x)


class DemoModel(torch.nn.Module):
    """linear -> kiln_demo::scaled_tanh -> linear."""

    def __init__(self, features: int = 16, hidden: int = 32, out: int = 8, scale: float = 0.5,
                 offset: float | None = None) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(features, hidden)
        self.out = torch.nn.Linear(hidden, out)
        self.scale = scale
        self.offset = offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        if self.offset is None:
            h = scaled_tanh(h, scale=self.scale)          # offset: the schema default
        else:
            h = scaled_tanh(h, self.scale, offset=self.offset)
        return self.out(h)


def export_demo(out_dir, shape=(4, 16)):
    """Exports DemoModel to out_dir/demo.kiln and writes a float32 input to out_dir/input.bin."""
    from pathlib import Path

    import kiln.export

    torch.manual_seed(0)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = DemoModel(features=shape[-1]).eval()
    x = torch.randn(*shape)
    report = kiln.export.export(model, (x,), out_dir / "demo.kiln")
    x.numpy().tofile(out_dir / "input.bin")
    with torch.no_grad():
        expected = model(x)
    return report, expected


if __name__ == "__main__":
    import sys

    report, expected = export_demo(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(report)
    print("eager output:", expected.flatten()[:8].tolist(), "...")
