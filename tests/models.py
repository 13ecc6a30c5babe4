"""The models the tests export, written here (no torchvision, no downloads)."""

from __future__ import annotations

import math

import torch
from torch import nn


class Fn(nn.Module):
    """A module whose forward is `fn`: one operator (or a few) under test, exported alone."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class ResidualCNN(nn.Module):
    """conv + batch norm + pooling + a residual connection + a linear head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=1, padding=1)
        self.bn0 = nn.BatchNorm2d(16)
        self.conv1 = nn.Conv2d(16, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)
        self.bn2 = nn.BatchNorm2d(16)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.maxpool = nn.MaxPool2d(2)
        self.avgpool = nn.AvgPool2d(3, stride=1, padding=1)
        self.head = nn.Linear(32, 10)
        for bn in (self.bn0, self.bn1, self.bn2):  # non-trivial running statistics
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        y = torch.relu(self.bn0(self.stem(x)))
        r = torch.relu(self.bn1(self.conv1(y)))
        r = self.bn2(self.conv2(r))
        y = torch.relu(y + r)
        y = self.maxpool(y)
        y = nn.functional.relu6(self.down(y))
        y = self.avgpool(y)
        y = nn.functional.adaptive_avg_pool2d(y, (1, 1))
        return self.head(torch.flatten(y, 1))


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block: attention through matmul + softmax, layer norm, gelu."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // h), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class TwoMethods(nn.Module):
    """One module, two exported methods that share weights."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 8)
        self.decoder = nn.Linear(8, 16)

    def forward(self, x):
        return self.decoder(torch.relu(self.encoder(x)))

    def encode(self, x):
        return torch.sigmoid(self.encoder(x))


class TiedEmbedding(nn.Module):
    """Embedding and output projection share one weight (stored once)."""

    def __init__(self, vocab=100, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, ids):
        return self.out(torch.tanh(self.embed(ids)))


class DynamicStateful(nn.Module):
    """A token count that varies per call (symbolic view, reshape and slice
    sizes) and two buffers updated in forward: a call counter and a running
    summary. Exported with dynamic_shapes={1: Dim("tokens", max=12)}."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("calls", torch.zeros(1))
        self.register_buffer("summary", torch.zeros(4, 8))

    def forward(self, x):
        batch, tokens, _ = x.shape
        y = self.proj(x).view(batch * tokens, 8).relu()
        y = y.view(batch, tokens, 2, 4).transpose(1, 2).reshape(batch, 2, tokens * 4)
        self.calls.add_(1)
        self.summary.copy_(self.summary * 0.5 + y.mean(dim=2).sum(0)[:1].view(1, 1).expand(4, 8))
        return y[:, :, : tokens * 2] * self.calls, self.summary.clone()


def build(name: str):
    """(model, example_inputs, export kwargs) for a model name; deterministic."""
    torch.manual_seed(0)
    if name == "mlp":
        return MLP().eval(), (torch.randn(4, 32),), {}
    if name == "cnn":
        return ResidualCNN().eval(), (torch.randn(2, 3, 32, 32),), {}
    if name == "cnn_unfused":  # every intermediate of the model kept (no fusion)
        return ResidualCNN().eval(), (torch.randn(2, 3, 32, 32),), {"optimize": False}
    if name == "encoder":
        return EncoderBlock().eval(), (torch.randn(2, 16, 64),), {}
    if name == "two_methods":
        m = TwoMethods().eval()
        x = torch.randn(3, 16)
        return m, (x,), {"methods": {"forward": (x,), "encode": (x,)}}
    if name == "tied":
        return TiedEmbedding().eval(), (torch.randint(0, 100, (2, 7)),), {}
    if name == "dynamic_state":
        tokens = torch.export.Dim("tokens", max=12)
        return DynamicStateful().eval(), (torch.randn(2, 5, 8),), {"dynamic_shapes": ({1: tokens},)}
    if name == "mlp_dynamic_batch":  # the batch dimension varies per call, up to 64
        batch = torch.export.Dim("batch", max=64)
        return MLP().eval(), (torch.randn(4, 32),), {"dynamic_shapes": ({0: batch},)}
    if name == "mlp_batch_2_to_8":  # the batch dimension varies per call, from 2 to 8 rows
        batch = torch.export.Dim("batch", min=2, max=8)
        return MLP().eval(), (torch.randn(4, 32),), {"dynamic_shapes": ({0: batch},)}
    if name == "mlp_f64":
        return MLP().double().eval(), (torch.randn(4, 32, dtype=torch.float64),), {}
    raise KeyError(name)
