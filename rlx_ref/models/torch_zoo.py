"""Real vision and language models in plain ``torch.nn``, with random weights from a seed.

ResNet-18 and MobileNetV3-small follow torchvision's published architectures layer for
layer (same module names, so their state_dict keys and shapes match torchvision's), without
importing torchvision. ``vit_tiny`` is ViT-Ti/16 and ``gpt2`` a GPT-2-shaped decoder. The
tests and the model benchmarks share these definitions. torch is an optional peer: nothing
in ``rlx_ref`` imports this module; importing it imports torch.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

RESNET18_PARAMS = 11_689_512           # torchvision.models.resnet18().parameters()
MOBILENET_V3_SMALL_PARAMS = 2_542_856  # torchvision.models.mobilenet_v3_small()
VIT_TINY_PARAMS = 5_717_416            # timm's vit_tiny_patch16_224
GPT2_PARAMS = 124_439_808              # GPT-2 small, the head tied to the token embedding


def seeded(model: nn.Module, seed: int = 0) -> nn.Module:
    """Re-draw every parameter and BN statistic from ``seed``; return the model in eval mode.

    Scales keep activations O(1) through deep stacks (fan-in normal weights, BN statistics
    near the identity but not equal to it, so folding or mapping them is exercised)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))
            elif name.endswith("running_var"):
                b.copy_(1.0 + 0.2 * torch.rand(b.shape, generator=gen))
    return model.eval()


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ── ResNet-18 (torchvision.models.resnet.BasicBlock / ResNet) ─────────────────

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(2, 2, 2, 2), num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], 2)
        self.layer3 = self._make_layer(256, layers[2], 2)
        self.layer4 = self._make_layer(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def _make_layer(self, planes, blocks, stride=1):
        down = None
        if stride != 1 or self.inplanes != planes:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                 nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, down)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(seed: int = 0, num_classes: int = 1000) -> nn.Module:
    return seeded(ResNet(num_classes=num_classes), seed)


# ── MobileNetV3-small (torchvision.models.mobilenetv3) ────────────────────────

def _make_divisible(v, divisor=8, min_value=None):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNAct(nn.Sequential):
    """torchvision's Conv2dNormActivation: conv (no bias), BN(eps 1e-3), optional act."""

    def __init__(self, cin, cout, k, stride=1, groups=1, act=None):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
        if act is not None:
            layers.append(act(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        s = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(s) * x


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, exp, cout, se, hs, stride):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act = nn.Hardswish if hs else nn.ReLU
        layers = []
        if exp != cin:
            layers.append(ConvBNAct(cin, exp, 1, act=act))
        layers.append(ConvBNAct(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcitation(exp, _make_divisible(exp // 4, 8)))
        layers.append(ConvBNAct(exp, cout, 1))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        out = self.block(x)
        return out + x if self.use_res_connect else out


# (input, kernel, expanded, out, squeeze-excite, hardswish, stride): torchvision's table
_V3_SMALL = [(16, 3, 16, 16, True, False, 2), (16, 3, 72, 24, False, False, 2),
             (24, 3, 88, 24, False, False, 1), (24, 5, 96, 40, True, True, 2),
             (40, 5, 240, 40, True, True, 1), (40, 5, 240, 40, True, True, 1),
             (40, 5, 120, 48, True, True, 1), (48, 5, 144, 48, True, True, 1),
             (48, 5, 288, 96, True, True, 2), (96, 5, 576, 96, True, True, 1),
             (96, 5, 576, 96, True, True, 1)]


class MobileNetV3(nn.Module):
    def __init__(self, setting=_V3_SMALL, last_channel=1024, num_classes=1000, dropout=0.2):
        super().__init__()
        layers = [ConvBNAct(3, setting[0][0], 3, 2, act=nn.Hardswish)]
        layers += [InvertedResidual(*row) for row in setting]
        last_in = setting[-1][3]
        layers.append(ConvBNAct(last_in, 6 * last_in, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * last_in, last_channel),
                                        nn.Hardswish(inplace=True),
                                        nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(last_channel, num_classes))

    def forward(self, x):
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)


def mobilenet_v3_small(seed: int = 0, num_classes: int = 1000) -> nn.Module:
    return seeded(MobileNetV3(num_classes=num_classes), seed)


# ── transformers ─────────────────────────────────────────────────────────────

class SelfAttention(nn.Module):
    """Fused qkv projection, scaled_dot_product_attention, output projection."""

    def __init__(self, dim, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    """Pre-norm transformer block; ``gelu`` is "none" (erf, ViT) or "tanh" (GPT-2)."""

    def __init__(self, dim, heads, causal, gelu, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=eps)
        self.attn = SelfAttention(dim, heads, causal)
        self.ln_2 = nn.LayerNorm(dim, eps=eps)
        self.fc = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU(approximate=gelu)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.out(self.act(self.fc(self.ln_2(x))))


class ViT(nn.Module):
    """ViT-Ti/16: conv patch embedding, class token, learned positions, 12 blocks."""

    def __init__(self, image=224, patch=16, dim=192, depth=12, heads=3, num_classes=1000):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads, False, "none", 1e-6)
                                      for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def vit_tiny(seed: int = 0, image: int = 224, depth: int = 12,
             num_classes: int = 1000) -> nn.Module:
    return seeded(ViT(image=image, depth=depth, num_classes=num_classes), seed)


class GPT2(nn.Module):
    """GPT-2 shaped: token + position embeddings, causal blocks, final LN, tied head."""

    def __init__(self, vocab=50257, ctx=1024, dim=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(ctx, dim)
        self.h = nn.Sequential(*[Block(dim, heads, True, "tanh", 1e-5) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        return self.lm_head(self.ln_f(self.h(x)))


def gpt2(seed: int = 0, vocab=50257, ctx=1024, dim=768, layers=12, heads=12) -> nn.Module:
    model = seeded(GPT2(vocab, ctx, dim, layers, heads), seed)
    with torch.no_grad():        # embeddings at GPT-2's scale (0.02), not 1/sqrt(dim)
        model.wte.weight.mul_(0.02 * math.sqrt(dim))
        model.wpe.weight.mul_(0.01 * math.sqrt(dim))
    return model
