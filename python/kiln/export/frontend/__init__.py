"""The exporter's front end: a PyTorch model traced by torch.export and
decomposed to the core ATen operators kiln's passes work on.

`decompositions.py` is the decomposition table (core ATen, minus the
decompositions that would break up operators kiln runs whole). Importing this
package does not import torch.
"""
