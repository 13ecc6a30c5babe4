"""Mobile vision networks written here (no torchvision), with deterministic random weights.

- `MobileNetV3Small`: the torchvision/paper MobileNetV3-Small layout (bneck
  table, hardswish/hardsigmoid, squeeze-and-excitation, 1024-wide head).
- `EfficientNetLike`: EfficientNet-B0's MBConv layout (SiLU, sigmoid SE,
  stochastic depth as identity in eval) scaled to half width and depth, with
  the expansion convs of the later stages grouped (groups=2; B0 has none) so
  the zoo also covers grouped convolutions that are not depthwise.

Both take 1x3x128x128 (`INPUT_SHAPE`) to keep tests quick; any size that is a
multiple of 32 works. BN affine parameters are random and the running
statistics are measured on random images, so every BN does real
normalisation in eval mode and activations stay well scaled through the
random network instead of blowing up or vanishing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

INPUT_SHAPE = (1, 3, 128, 128)


def _make_divisible(v: float, divisor: int = 8) -> int:
    """Channel rounding of the reference implementations (never below 90% of v)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class ConvBNAct(nn.Sequential):
    def __init__(self, cin, cout, kernel, stride=1, groups=1, act: type[nn.Module] | None = nn.ReLU):
        layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """x * gate(fc2(act(fc1(avgpool(x))))) with 1x1 convs as the two fully connected layers."""

    def __init__(self, channels, squeeze, act: type[nn.Module], gate: type[nn.Module]):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


# --------------------------------------------------------------------------- MobileNetV3-Small


class InvertedResidualV3(nn.Module):
    def __init__(self, cin, kernel, expanded, cout, use_se, act, stride):
        super().__init__()
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(ConvBNAct(cin, expanded, 1, act=act))
        layers.append(ConvBNAct(expanded, expanded, kernel, stride, groups=expanded, act=act))  # depthwise
        if use_se:
            layers.append(SqueezeExcite(expanded, _make_divisible(expanded // 4), nn.ReLU, nn.Hardsigmoid))
        layers.append(ConvBNAct(expanded, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_residual else y


class MobileNetV3Small(nn.Module):
    # in, kernel, expanded, out, squeeze-excite, activation, stride (Howard et al. 2019, table 2)
    CONFIG = [
        (16, 3, 16, 16, True, "RE", 2),
        (16, 3, 72, 24, False, "RE", 2),
        (24, 3, 88, 24, False, "RE", 1),
        (24, 5, 96, 40, True, "HS", 2),
        (40, 5, 240, 40, True, "HS", 1),
        (40, 5, 240, 40, True, "HS", 1),
        (40, 5, 120, 48, True, "HS", 1),
        (48, 5, 144, 48, True, "HS", 1),
        (48, 5, 288, 96, True, "HS", 2),
        (96, 5, 576, 96, True, "HS", 1),
        (96, 5, 576, 96, True, "HS", 1),
    ]

    def __init__(self, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()
        acts = {"RE": nn.ReLU, "HS": nn.Hardswish}
        layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, act=nn.Hardswish)]
        for cin, k, exp, cout, se, act, stride in self.CONFIG:
            layers.append(InvertedResidualV3(cin, k, exp, cout, se, acts[act], stride))
        layers.append(ConvBNAct(96, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(dropout),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------------- EfficientNet-like


class MBConv(nn.Module):
    def __init__(self, cin, cout, expand_ratio, kernel, stride, expand_groups=1):
        super().__init__()
        self.use_residual = stride == 1 and cin == cout
        expanded = cin * expand_ratio
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNAct(cin, expanded, 1, groups=expand_groups, act=nn.SiLU))
        layers.append(ConvBNAct(expanded, expanded, kernel, stride, groups=expanded, act=nn.SiLU))  # depthwise
        layers.append(SqueezeExcite(expanded, max(1, cin // 4), nn.SiLU, nn.Sigmoid))
        layers.append(ConvBNAct(expanded, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_residual else y  # stochastic depth is the identity in eval


class EfficientNetLike(nn.Module):
    # expand ratio, kernel, stride, in, out, layers: EfficientNet-B0 (Tan & Le 2019, table 1)
    B0 = [
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    ]

    def __init__(self, width: float = 0.5, depth: float = 0.5, num_classes: int = 1000,
                 dropout: float = 0.2, grouped_from_stage: int = 3):
        super().__init__()
        ch = lambda c: _make_divisible(c * width)  # noqa: E731
        stem = ch(32)
        layers: list[nn.Module] = [ConvBNAct(3, stem, 3, 2, act=nn.SiLU)]
        for stage, (ratio, k, stride, cin, cout, n) in enumerate(self.B0):
            cin, cout = ch(cin), ch(cout)
            groups = 2 if stage >= grouped_from_stage else 1
            for i in range(math.ceil(n * depth)):
                layers.append(MBConv(cin if i == 0 else cout, cout, ratio, k, stride if i == 0 else 1, groups))
        last_in = ch(self.B0[-1][4])
        head = 4 * last_in  # B0: 320 -> 1280
        layers.append(ConvBNAct(last_in, head, 1, act=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(head, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------------- ResNet-18 (bench/compare.py)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = ConvBNAct(cin, cout, 3, stride)
        self.conv2 = ConvBNAct(cout, cout, 3, act=None)
        self.shortcut = (ConvBNAct(cin, cout, 1, stride, act=None)
                         if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18's layout (He et al. 2016): 7x7 stem, max pool, BasicBlocks [2, 2, 2, 2] of 64..512 channels."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for i, cout in enumerate((64, 128, 256, 512)):
            layers += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# --------------------------------------------------------------------------- construction


@torch.no_grad()
def _randomize(model: nn.Module, seed: int) -> None:
    """Seeded weights and BN affine parameters, then BN statistics measured on random images.

    The statistics are measured last, with every BN already in its final state,
    so each one matches what it sees in eval mode: activations keep their scale
    through the random network instead of drifting layer after layer.
    """
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * math.sqrt(2.0 / fan_in))
            if m.bias is not None:
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.copy_(torch.empty(m.weight.shape).uniform_(0.5, 1.5, generator=gen))
            m.bias.copy_(torch.empty(m.bias.shape).uniform_(-0.2, 0.2, generator=gen))
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    for _ in range(2):
        model(torch.randn((4, *INPUT_SHAPE[1:]), generator=gen))
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = 0.1
    model.eval()


MODELS = ("mobilenet_v3_small", "efficientnet_like")


def build(name: str, seed: int = 0, shape: tuple[int, ...] = INPUT_SHAPE) -> tuple[nn.Module, torch.Tensor]:
    """(model in eval mode, example input of `shape`); deterministic for a given seed.
    `name`: one of MODELS, or "resnet18" (bench/compare.py's, not tested here: too slow)."""
    model = {"mobilenet_v3_small": MobileNetV3Small, "efficientnet_like": EfficientNetLike,
             "resnet18": ResNet18}[name]()
    _randomize(model, seed)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed + 1))
    return model, x
