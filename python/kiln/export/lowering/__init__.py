"""The exporter's back end: a graph after the passes becomes the kiln IR, with
its memory plan, and the IR becomes the bytes of a .kiln file.

`ir.py` is the IR (torch-free dataclasses mirroring schema/program.fbs);
`method.py` lowers one method's FX graph into it, with `values.py` (the value
table), `arguments.py` (one schema argument, one value), `dtypes.py`,
`symbolic.py` (dynamic sizes: bounds and run-time IntOps) and `constants.py`
(the deduplicated constant segments); `memory_plan.py` places activations and
state in arenas; `serialize.py` writes the file. Importing this package does
not import torch.
"""
